//! TLS trust for both mail connections: the built-in web roots plus the configured
//! extra root certificates (PEM), as a rustls configuration for IMAP and as lettre's
//! TLS parameters for SMTP; and recognising certificate failures among errors.

use std::error::Error as StdError;
use std::path::PathBuf;
use std::sync::Arc;

use lettre::transport::smtp::client::{Certificate, CertificateStore, TlsParameters};
use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use squidbot_channels::ChannelError;

/// The extra roots, read once when the channel is built.
#[derive(Clone)]
pub(crate) struct Trust {
    /// DER of every extra root certificate.
    extra_roots: Vec<CertificateDer<'static>>,
    /// The same certificates as lettre wants them.
    extra_roots_pem: Vec<Vec<u8>>,
    /// The configuration for IMAP connections.
    pub client_config: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for Trust {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Trust").field("extra_roots", &self.extra_roots.len()).finish_non_exhaustive()
    }
}

impl Trust {
    /// Reads the PEM files; a missing or unreadable file is a configuration error.
    pub(crate) fn load(paths: &[PathBuf]) -> Result<Self, ChannelError> {
        let mut extra_roots = Vec::new();
        let mut extra_roots_pem = Vec::new();
        for path in paths {
            let pem = std::fs::read(path).map_err(|error| {
                ChannelError::fatal(format!("can't read root certificate {}: {error}", path.display()))
            })?;
            let certificates =
                CertificateDer::pem_slice_iter(&pem).collect::<Result<Vec<_>, _>>().map_err(|error| {
                    ChannelError::fatal(format!("can't read root certificate {}: {error}", path.display()))
                })?;
            if certificates.is_empty() {
                return Err(ChannelError::fatal(format!(
                    "can't read root certificate {}: the file holds no PEM certificate",
                    path.display()
                )));
            }
            extra_roots.extend(certificates);
            extra_roots_pem.push(pem);
        }
        let mut roots = RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
        for certificate in &extra_roots {
            roots
                .add(certificate.clone())
                .map_err(|error| ChannelError::fatal(format!("can't trust an extra root certificate: {error}")))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let client_config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|error| ChannelError::fatal(format!("can't set up TLS: {error}")))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Self { extra_roots, extra_roots_pem, client_config: Arc::new(client_config) })
    }

    /// lettre's TLS parameters for `host`: the web roots and the extra ones.
    pub(crate) fn smtp_parameters(&self, host: &str) -> Result<TlsParameters, ChannelError> {
        let mut builder = TlsParameters::builder(host.to_owned()).certificate_store(CertificateStore::WebpkiRoots);
        for pem in &self.extra_roots_pem {
            let certificate = Certificate::from_pem(pem)
                .map_err(|error| ChannelError::fatal(format!("can't trust an extra root certificate: {error}")))?;
            builder = builder.add_root_certificate(certificate);
        }
        builder.build_rustls().map_err(|error| ChannelError::fatal(format!("can't set up TLS for {host}: {error}")))
    }
}

/// The certificate problem behind an error, if there is one (untrusted issuer, wrong
/// name, expired), looked up by type through the error's sources.
pub(crate) fn certificate_problem(error: &(dyn StdError + 'static)) -> Option<String> {
    let mut current: Option<&(dyn StdError + 'static)> = Some(error);
    while let Some(error) = current {
        if let Some(rustls_error) = error.downcast_ref::<rustls::Error>() {
            return is_certificate_error(rustls_error).then(|| rustls_error.to_string());
        }
        if let Some(io_error) = error.downcast_ref::<std::io::Error>()
            && let Some(inner) = io_error.get_ref()
            && let Some(rustls_error) = inner.downcast_ref::<rustls::Error>()
        {
            return is_certificate_error(rustls_error).then(|| rustls_error.to_string());
        }
        current = error.source();
    }
    None
}

fn is_certificate_error(error: &rustls::Error) -> bool {
    matches!(
        error,
        rustls::Error::InvalidCertificate(_)
            | rustls::Error::NoCertificatesPresented
            | rustls::Error::UnsupportedNameType
            | rustls::Error::InvalidCertRevocationList(_)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_root_file_is_fatal() {
        let error = Trust::load(&[PathBuf::from("/nonexistent/ca.pem")]).unwrap_err();
        assert_eq!(error.kind, squidbot_channels::ChannelErrorKind::Fatal);
        assert!(error.message.starts_with("can't read root certificate /nonexistent/ca.pem"), "{error}");
    }

    #[test]
    fn a_file_without_certificates_is_fatal() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("empty.pem");
        std::fs::write(&path, "not a certificate\n").unwrap();
        let error = Trust::load(std::slice::from_ref(&path)).unwrap_err();
        assert!(error.message.contains("holds no PEM certificate"), "{error}");
    }

    #[test]
    fn certificate_errors_are_found_inside_io_errors() {
        let rustls_error = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        let io_error = std::io::Error::new(std::io::ErrorKind::InvalidData, rustls_error);
        assert!(certificate_problem(&io_error).is_some_and(|problem| problem.contains("UnknownIssuer")));
        let other = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
        assert_eq!(certificate_problem(&other), None);
    }
}
