//! The HTTP client moniker reaches remote servers and authorization servers with, and TLS
//! with rustls (its `ring` provider; no OpenSSL): the platform's trust store, plus a server's
//! own CA (`tls.ca_file`), and a client certificate for mutual TLS (`tls.client_cert`,
//! `tls.client_key`). A certificate problem is never skipped: it is named (unknown issuer,
//! expired, issued for another name) with what to do; so is every other failed request.

use std::error::Error as StdError;
use std::sync::Arc;
use std::time::Duration;

use moniker_config::Tls;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{CertificateError, ClientConfig};

/// The HTTP client for one remote server (and its authorization server): its TLS settings,
/// and `timeout` to connect.
pub(crate) fn http_client(tls: &Tls, timeout: Duration) -> Result<reqwest::Client, String> {
    let config = client_config(tls)?;
    reqwest::Client::builder()
        .connect_timeout(timeout)
        .tls_backend_preconfigured(config)
        .redirect(reqwest::redirect::Policy::custom(same_origin))
        .build()
        .map_err(|e| format!("cannot set up HTTPS: {e}"))
}

/// Redirects are followed only within the origin the request went to (scheme, host and port),
/// at most 10 times. What moniker sends carries the server's configured headers, its tokens
/// and, to an authorization server, the client secret: reqwest's own policy strips only
/// `Authorization` and cookies on the way to another host, and follows https to http. A
/// redirect elsewhere ends there: the caller sees the 3xx.
fn same_origin(attempt: reqwest::redirect::Attempt<'_>) -> reqwest::redirect::Action {
    let first = attempt.previous().first();
    let same = first.is_some_and(|first| first.origin() == attempt.url().origin());
    if !same {
        tracing::warn!(
            from = %first.map(|u| moniker_config::shown_url(u.as_str())).unwrap_or_default(),
            to = %moniker_config::shown_url(attempt.url().as_str()),
            "a redirect to another origin was not followed"
        );
        attempt.stop()
    } else if attempt.previous().len() > 10 {
        attempt.error("more than 10 redirects")
    } else {
        attempt.follow()
    }
}

fn client_config(tls: &Tls) -> Result<ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let extra = match &tls.ca_file {
        Some(path) => {
            let certs = certificates(path, "tls.ca_file")?;
            if certs.is_empty() {
                return Err(format!(
                    "`tls.ca_file` {path} holds no PEM certificate (`-----BEGIN CERTIFICATE-----`)"
                ));
            }
            certs
        }
        None => Vec::new(),
    };
    let verifier =
        rustls_platform_verifier::Verifier::new_with_extra_roots(extra, provider.clone())
            .map_err(|e| format!("cannot read the platform's trust store: {e}"))?;
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("cannot set up TLS: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier));
    let mut config = match (&tls.client_cert, &tls.client_key) {
        (Some(cert), Some(key)) => {
            let chain = certificates(cert, "tls.client_cert")?;
            if chain.is_empty() {
                return Err(format!(
                    "`tls.client_cert` {cert} holds no PEM certificate (`-----BEGIN CERTIFICATE-----`)"
                ));
            }
            let key = PrivateKeyDer::from_pem_file(key).map_err(|e| {
                format!("cannot read the private key in `tls.client_key` {key}: {e}")
            })?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("the client certificate and key do not go together: {e}"))?
        }
        _ => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

fn certificates(path: &str, key: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("cannot read the certificates in `{key}` {path}: {e}"))
}

/// What a failed TLS handshake means, when the failure was one (read along the error's
/// sources): the certificate problem in words, and what to do.
pub(crate) fn explain(error: &(dyn StdError + 'static)) -> Option<String> {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(tls) = e.downcast_ref::<rustls::Error>() {
            return Some(describe(tls));
        }
        // An `io::Error` hides the error it wraps from `source()`: it is looked into.
        next = match e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            Some(inner) => Some(inner as &(dyn StdError + 'static)),
            None => e.source(),
        };
    }
    None
}

fn describe(error: &rustls::Error) -> String {
    let rustls::Error::InvalidCertificate(problem) = error else {
        return format!("the TLS handshake failed: {error}");
    };
    match problem {
        CertificateError::UnknownIssuer => "the server's certificate is signed by an unknown issuer (a CA neither the platform nor `tls.ca_file` trusts): set `tls.ca_file` to the PEM file of the CA that signed it".to_owned(),
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
            "the server's certificate has expired: the server needs a new one".to_owned()
        }
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
            "the server's certificate is not valid yet (check this machine's clock)".to_owned()
        }
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
            "the server's certificate was issued for another name than the URL's host: use the host name the certificate names".to_owned()
        }
        CertificateError::Revoked => "the server's certificate was revoked".to_owned(),
        other => format!("the server's certificate is refused: {other:?}"),
    }
}

/// The innermost cause of an error, which says what happened ("Connection refused"); a
/// certificate problem in words.
pub(crate) fn cause(e: &reqwest::Error) -> String {
    if let Some(tls) = explain(e) {
        return tls;
    }
    let mut last: &dyn std::error::Error = e;
    while let Some(source) = last.source() {
        last = source;
    }
    if e.is_timeout() {
        format!("timed out ({last})")
    } else {
        last.to_string()
    }
}
