//! Real TLS to a remote server: a CA and certificates made here (rcgen), and a TLS
//! terminator (tokio-rustls) in front of the test's MCP server. moniker trusts the CA through
//! `tls.ca_file`; without it, or for a host name the certificate does not name, the server
//! is refused with the problem in words. Mutual TLS with `tls.client_cert`/`client_key`.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use moniker_config::{Auth, Tls};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

use super::{Client, Remote, ServerEntry, ServerSpec, echo_result, raw_result, start};
use serde_json::json;

struct Pki {
    ca_pem: String,
    ca: Issuer<'static, KeyPair>,
}

impl Pki {
    fn new() -> Self {
        let key = KeyPair::generate().expect("a CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "moniker test CA");
        let cert = params.self_signed(&key).expect("the CA certificate");
        Self {
            ca_pem: cert.pem(),
            ca: Issuer::new(params, key),
        }
    }

    /// A certificate for `names`, signed by the CA: (certificate PEM, key PEM).
    fn issue(&self, names: &[&str]) -> (String, String) {
        let key = KeyPair::generate().expect("a key");
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let params = CertificateParams::new(names).expect("params");
        let cert = params.signed_by(&key, &self.ca).expect("a certificate");
        (cert.pem(), key.serialize_pem())
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Terminates TLS on a fresh port and forwards the bytes to `backend`; with `client_ca`,
/// only clients with a certificate of that CA get through.
async fn terminator(
    backend: SocketAddr,
    (cert, key): (String, String),
    client_ca: Option<&str>,
) -> SocketAddr {
    let chain = vec![CertificateDer::from_pem_slice(cert.as_bytes()).expect("cert")];
    let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).expect("key");
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("versions");
    let builder = match client_ca {
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            roots
                .add(CertificateDer::from_pem_slice(ca.as_bytes()).expect("ca"))
                .expect("a root");
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider(),
            )
            .build()
            .expect("a client verifier");
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let config = builder.with_single_cert(chain, key).expect("server config");
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(stream).await else {
                    return;
                };
                let Ok(mut plain) = tokio::net::TcpStream::connect(backend).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    addr
}

fn entry(id: &str, url: &str, tls: Tls) -> ServerEntry {
    ServerEntry {
        id: id.parse().expect("server id"),
        spec: ServerSpec::Http {
            url: url.to_owned(),
            headers: Default::default(),
            tls,
            auth: Auth::default(),
            forward: Default::default(),
        },
        modern: false,
        sandbox: None,
        per_person: None,
    }
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    path.display().to_string()
}

/// The test's MCP server behind TLS: its https URL for `host`.
async fn behind_tls(pki: &Pki, names: &[&str], host: &str, client_ca: Option<&str>) -> String {
    let remote = Remote::new(false);
    let url = remote.serve().await;
    let backend: SocketAddr = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .parse()
        .expect("backend address");
    let addr = terminator(backend, pki.issue(names), client_ca).await;
    format!("https://{host}:{}/mcp", addr.port())
}

#[tokio::test]
async fn https_with_a_private_ca_works_and_bad_certificates_are_named() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let pki = Pki::new();
    let ca_file = write(dir.path(), "ca.pem", &pki.ca_pem);
    let trusted = Tls {
        ca_file: Some(ca_file.clone()),
        ..Tls::default()
    };
    let good = behind_tls(&pki, &["127.0.0.1", "localhost"], "127.0.0.1", None).await;
    // The same certificate, but the URL names a host the certificate does not.
    let misnamed_pki_url = behind_tls(&pki, &["localhost"], "127.0.0.1", None).await;
    let gateway = start(vec![
        entry("good", &good, trusted.clone()),
        entry("unknown", &good, Tls::default()),
        entry("misnamed", &misnamed_pki_url, trusted),
    ])
    .await;
    let status = gateway.servers.server_status();
    assert!(status["good"].up, "{:?}", status["good"].last_error);
    let why = status["unknown"].last_error.clone().expect("a reason");
    assert!(!status["unknown"].up);
    assert!(
        why.contains("unknown issuer") && why.contains("tls.ca_file"),
        "{why}"
    );
    let why = status["misnamed"].last_error.clone().expect("a reason");
    assert!(!status["misnamed"].up);
    assert!(why.contains("another name"), "{why}");

    let mut client = Client::new(&gateway).await;
    let args = json!({"text": "over tls"});
    let line = client
        .call_raw("tools/call", json!({"name": "echo", "arguments": args}))
        .await;
    assert_eq!(raw_result(&line), echo_result(&args), "{line}");
    gateway.shutdown().await;
}

#[tokio::test]
async fn mutual_tls_sends_the_client_certificate() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let pki = Pki::new();
    let ca_file = write(dir.path(), "ca.pem", &pki.ca_pem);
    let (cert, key) = pki.issue(&["moniker-client"]);
    let url = behind_tls(&pki, &["127.0.0.1"], "127.0.0.1", Some(&pki.ca_pem)).await;
    let with_cert = Tls {
        ca_file: Some(ca_file.clone()),
        client_cert: Some(write(dir.path(), "client.pem", &cert)),
        client_key: Some(write(dir.path(), "client.key", &key)),
    };
    let without = Tls {
        ca_file: Some(ca_file),
        ..Tls::default()
    };
    let gateway = start(vec![
        entry("mutual", &url, with_cert),
        entry("anonymous", &url, without),
    ])
    .await;
    let status = gateway.servers.server_status();
    assert!(status["mutual"].up, "{:?}", status["mutual"].last_error);
    assert!(!status["anonymous"].up);
    gateway.shutdown().await;
}
