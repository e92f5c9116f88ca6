//! A self-signed CA and a serving certificate it signs, for the webhook's
//! names: what `manifests` puts into a Secret (and the CA into the CRD),
//! and what a test or an operator run outside the cluster serves with.

use std::path::Path;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, date_time_ymd,
};

use super::error::WebhookError;
use super::tls::{CERT_FILE, KEY_FILE};

/// The CA certificate's file in a certificate directory
/// ([`WebhookCertificates::write_to`]): what the CRD's `caBundle` holds.
pub const CA_FILE: &str = "ca.crt";

/// How many years a generated certificate is valid.
const VALID_YEARS: i16 = 10;

/// A generated CA and the serving certificate and key it signed, PEM.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookCertificates {
    /// The CA's certificate: the CRD's `caBundle`.
    pub ca_pem: String,
    /// The serving certificate (`tls.crt`).
    pub cert_pem: String,
    /// The serving certificate's private key (`tls.key`).
    pub key_pem: String,
}

impl std::fmt::Debug for WebhookCertificates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookCertificates")
            .field("ca_pem", &self.ca_pem)
            .field("cert_pem", &self.cert_pem)
            .finish_non_exhaustive()
    }
}

impl WebhookCertificates {
    /// A new CA (ECDSA P-256), and a serving certificate it signs for
    /// `names` (DNS names, or IP addresses such as `127.0.0.1`), valid
    /// from today for ten years.
    ///
    /// # Errors
    /// A name is not a valid DNS name; generation failed.
    pub fn generate(names: &[String]) -> Result<Self, WebhookError> {
        let today = jiff::Timestamp::now()
            .to_zoned(jiff::tz::TimeZone::UTC)
            .date();
        let not_before = date_time_ymd(
            i32::from(today.year()),
            u8::try_from(today.month()).unwrap_or(1),
            u8::try_from(today.day()).unwrap_or(1),
        );
        let not_after = date_time_ymd(i32::from(today.year() + VALID_YEARS), 1, 1);

        let mut ca = CertificateParams::default();
        ca.distinguished_name
            .push(DnType::CommonName, "operator-fsm webhook CA");
        ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        ca.not_before = not_before;
        ca.not_after = not_after;
        let ca_key = KeyPair::generate().map_err(WebhookError::Generate)?;
        let ca = CertifiedIssuer::self_signed(ca, ca_key).map_err(WebhookError::Generate)?;

        let mut serving = CertificateParams::new(names.to_vec()).map_err(WebhookError::Generate)?;
        let common_name = names.first().map_or("operator-fsm webhook", String::as_str);
        serving
            .distinguished_name
            .push(DnType::CommonName, common_name);
        serving.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        serving.use_authority_key_identifier_extension = true;
        serving.not_before = not_before;
        serving.not_after = not_after;
        let key = KeyPair::generate().map_err(WebhookError::Generate)?;
        let cert = serving
            .signed_by(&key, &ca)
            .map_err(WebhookError::Generate)?;
        Ok(WebhookCertificates {
            ca_pem: ca.pem(),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// [`generate`](Self::generate) for the Service `name` in `namespace`:
    /// `name.namespace.svc` (the name the API server calls) and its
    /// shorter and longer forms.
    ///
    /// # Errors
    /// As [`generate`](Self::generate).
    pub fn for_service(name: &str, namespace: &str) -> Result<Self, WebhookError> {
        Self::generate(&service_names(name, namespace))
    }

    /// The SHA-256 of the serving certificate (its DER), in hex: what
    /// tells one certificate from another, and nothing secret.
    #[must_use]
    pub fn fingerprint(&self) -> String {
        use rustls_pki_types::pem::PemObject;
        let der = rustls_pki_types::CertificateDer::from_pem_slice(self.cert_pem.as_bytes())
            .map(|der| der.to_vec())
            .unwrap_or_else(|_| self.cert_pem.as_bytes().to_vec());
        let digest = ring::digest::digest(&ring::digest::SHA256, &der);
        digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Writes `ca.crt`, `tls.crt` and `tls.key` (readable by the owner
    /// only) into `dir`, which must exist: what `run --webhook-cert-dir`
    /// reads.
    ///
    /// # Errors
    /// A file cannot be written.
    pub fn write_to(&self, dir: &Path) -> Result<(), WebhookError> {
        for (name, text) in [
            (CA_FILE, &self.ca_pem),
            (CERT_FILE, &self.cert_pem),
            (KEY_FILE, &self.key_pem),
        ] {
            let path = dir.join(name);
            write_private(&path, text.as_bytes())
                .map_err(|source| WebhookError::File { path, source })?;
        }
        Ok(())
    }
}

/// The DNS names of Service `name` in `namespace`, the one the API server
/// calls (`name.namespace.svc`) first.
#[must_use]
pub fn service_names(name: &str, namespace: &str) -> Vec<String> {
    vec![
        format!("{name}.{namespace}.svc"),
        name.to_owned(),
        format!("{name}.{namespace}"),
        format!("{name}.{namespace}.svc.cluster.local"),
    ]
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)?.write_all(bytes)
}
