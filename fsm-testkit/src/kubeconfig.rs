//! A kubeconfig for a server on loopback, accepted by `kubectl` and
//! `kube::Config`.

use std::net::SocketAddr;
use std::path::Path;

/// The cluster, user and context name written into kubeconfigs.
pub const CONTEXT: &str = "fsm-testkit";

/// The kubeconfig text for a server at `addr` (plain HTTP, no credentials).
#[must_use]
pub fn render(addr: SocketAddr, namespace: &str) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: {CONTEXT}
  cluster:
    server: http://{addr}
users:
- name: {CONTEXT}
  user: {{}}
contexts:
- name: {CONTEXT}
  context:
    cluster: {CONTEXT}
    user: {CONTEXT}
    namespace: {namespace}
current-context: {CONTEXT}
preferences: {{}}
"
    )
}

/// Writes the kubeconfig for `addr` to `path`.
///
/// # Errors
/// The I/O error of writing the file.
pub fn write(path: &Path, addr: SocketAddr, namespace: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent()
        && !dir.as_os_str().is_empty()
    {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, render(addr, namespace))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_config_accepts_it() {
        let addr: SocketAddr = "127.0.0.1:4321".parse().unwrap();
        let text = render(addr, "default");
        let kc = kube::config::Kubeconfig::from_yaml(&text).unwrap();
        assert_eq!(kc.current_context.as_deref(), Some(CONTEXT));
        let cluster = kc.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.server.as_deref(), Some("http://127.0.0.1:4321"));
    }
}
