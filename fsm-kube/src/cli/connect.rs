//! A client for the cluster the command line names.

use kube::Client;

use super::{ConnectArgs, Error};

/// A client from `--kubeconfig`/`--context`, or inferred (`$KUBECONFIG`,
/// `~/.kube/config`, in-cluster).
///
/// # Errors
/// [`Error::Config`] when no configuration is usable.
pub async fn connect(args: &ConnectArgs) -> Result<Client, Error> {
    use kube::config::{KubeConfigOptions, Kubeconfig};
    let options = KubeConfigOptions {
        context: args.context.clone(),
        ..KubeConfigOptions::default()
    };
    let config = match &args.kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path).map_err(|e| Error::Config(Box::new(e)))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .map_err(|e| Error::Config(Box::new(e)))?
        }
        None if args.context.is_some() => kube::Config::from_kubeconfig(&options)
            .await
            .map_err(|e| Error::Config(Box::new(e)))?,
        None => kube::Config::infer()
            .await
            .map_err(|e| Error::Config(Box::new(e)))?,
    };
    Client::try_from(config).map_err(|e| Error::Config(Box::new(e)))
}
