//! A throwaway CA and a server certificate for 127.0.0.1 and localhost, made with the
//! openssl CLI (EC keys: fast to generate).

use std::path::{Path, PathBuf};

use tokio::process::Command;

/// The files the servers and the adapter use.
pub struct Certificates {
    /// The CA certificate (PEM), for clients to trust.
    pub ca: PathBuf,
    /// The server certificate (PEM).
    pub certificate: PathBuf,
    /// The server key (PEM).
    pub key: PathBuf,
}

impl Certificates {
    /// Writes a fresh CA, server key and certificate into `directory`.
    pub async fn generate(directory: &Path) -> Self {
        std::fs::create_dir_all(directory).unwrap();
        let path = |name: &str| directory.join(name);
        let extensions = path("server.ext");
        std::fs::write(
            &extensions,
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=critical,CA:FALSE\n\
             keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
        )
        .unwrap();
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=squidbot test CA",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
            "-keyout",
            path_str(&path("ca.key")),
            "-out",
            path_str(&path("ca.pem")),
        ])
        .await;
        openssl(&[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-subj",
            "/CN=localhost",
            "-keyout",
            path_str(&path("server.key")),
            "-out",
            path_str(&path("server.csr")),
        ])
        .await;
        openssl(&[
            "x509",
            "-req",
            "-in",
            path_str(&path("server.csr")),
            "-CA",
            path_str(&path("ca.pem")),
            "-CAkey",
            path_str(&path("ca.key")),
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            path_str(&extensions),
            "-out",
            path_str(&path("server.pem")),
        ])
        .await;
        Self { ca: path("ca.pem"), certificate: path("server.pem"), key: path("server.key") }
    }
}

fn path_str(path: &Path) -> &str {
    path.to_str().unwrap()
}

async fn openssl(arguments: &[&str]) {
    let output = Command::new("openssl")
        .args(arguments)
        .output()
        .await
        .unwrap_or_else(|error| panic!("can't run openssl ({error}): run scripts/install-mail-servers"));
    assert!(output.status.success(), "openssl {arguments:?} failed: {}", String::from_utf8_lossy(&output.stderr));
}
