//! TLS, as Redis 7.4 configures it (`tls-*` directives), on rustls with the `ring`
//! provider. This module builds the contexts (`TlsContext`: one server configuration per
//! `tls-auth-clients` mode and one client configuration for replication and the cluster
//! bus) and provides the stream (`stream::TlsStream`) that the event loop, the
//! replica link and the cluster bus wrap around a TCP socket. Nothing outside this
//! module names rustls.

mod cert;
mod ciphers;
pub mod stream;

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::{NoServerSessionStorage, ServerSessionMemoryCache, WebPkiClientVerifier};
use rustls::sign::{CertifiedKey, SingleCertAndKey};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};

use crate::config::Config;

pub use cert::common_name;
pub use stream::{LinkStream, TlsStream};

/// The directives whose change rebuilds the context (Redis's `applyTlsCfg`).
pub const CONTEXT_DIRECTIVES: &[&str] = &[
    "tls-session-cache-size",
    "tls-session-cache-timeout",
    "tls-cluster",
    "tls-replication",
    "tls-prefer-server-ciphers",
    "tls-session-caching",
    "tls-cert-file",
    "tls-key-file",
    "tls-key-file-pass",
    "tls-client-cert-file",
    "tls-client-key-file",
    "tls-client-key-file-pass",
    "tls-dh-params-file",
    "tls-ca-cert-file",
    "tls-ca-cert-dir",
    "tls-protocols",
    "tls-ciphers",
    "tls-ciphersuites",
];

/// CONFIG SET's reason when the context cannot be built (Redis's text).
pub const UPDATE_FAILED: &str = "Unable to update TLS configuration. Check server logs.";

/// `tls-auth-clients`: whether a client must present a certificate.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ClientAuth {
    No,
    Yes,
    Optional,
}

impl ClientAuth {
    pub fn of(config: &Config) -> ClientAuth {
        match config.stored_str("tls-auth-clients").as_str() {
            "no" => ClientAuth::No,
            "optional" => ClientAuth::Optional,
            _ => ClientAuth::Yes,
        }
    }
}

/// The configured TLS state: server side (accepted connections) and client side
/// (the replica link, the cluster bus).
pub struct TlsContext {
    /// Indexed by `ClientAuth as usize`; `Yes`/`Optional` are absent without a CA
    /// (a connection needing them is then refused, never let through unverified).
    servers: [Option<Arc<ServerConfig>>; 3],
    client: Arc<ClientConfig>,
}

impl TlsContext {
    /// The server configuration for a newly accepted connection.
    pub fn server(&self, auth: ClientAuth) -> Option<Arc<ServerConfig>> {
        self.servers[auth as usize].clone()
    }

    pub fn client(&self) -> Arc<ClientConfig> {
        self.client.clone()
    }
}

/// Whether TLS must be configured at all (Redis: a TLS port, TLS replication or a
/// TLS cluster bus).
pub fn needed(config: &Config) -> bool {
    config.stored_str("tls-port") != "0"
        || config.stored_bool("tls-replication")
        || config.stored_bool("tls-cluster")
}

/// `tls-port`: 0 when there is no TLS listener.
pub fn port(config: &Config) -> u16 {
    config.stored_i64("tls-port") as u16
}

fn opt(config: &Config, name: &str) -> Option<String> {
    Some(config.stored_str(name)).filter(|v| !v.is_empty())
}

/// Builds the contexts from the configuration. On failure, the lines Redis would log
/// (each already logged as a warning here).
pub fn build(config: &Config) -> Result<TlsContext, String> {
    build_quiet(config).inspect_err(|e| crate::log::warning(e))
}

fn build_quiet(config: &Config) -> Result<TlsContext, String> {
    let Some(cert_file) = opt(config, "tls-cert-file") else {
        return Err("No tls-cert-file configured!".into());
    };
    let Some(key_file) = opt(config, "tls-key-file") else {
        return Err("No tls-key-file configured!".into());
    };
    let auth = ClientAuth::of(config);
    let ca_file = opt(config, "tls-ca-cert-file");
    let ca_dir = opt(config, "tls-ca-cert-dir");
    if (auth != ClientAuth::No
        || config.stored_bool("tls-cluster")
        || config.stored_bool("tls-replication"))
        && ca_file.is_none()
        && ca_dir.is_none()
    {
        return Err("Either tls-ca-cert-file or tls-ca-cert-dir must be specified when tls-cluster, tls-replication or tls-auth-clients are enabled!".into());
    }
    let versions = protocols(opt(config, "tls-protocols").as_deref())?;
    let suites = ciphers::select(
        opt(config, "tls-ciphers").as_deref(),
        opt(config, "tls-ciphersuites").as_deref(),
    )?;
    let provider = Arc::new(CryptoProvider {
        cipher_suites: suites,
        ..rustls::crypto::ring::default_provider()
    });

    let certs = load_certs(&cert_file)
        .map_err(|e| format!("Failed to load certificate: {cert_file}: {e}"))?;
    let key = load_key(&key_file, opt(config, "tls-key-file-pass").as_deref())
        .map_err(|e| format!("Failed to load private key: {key_file}: {e}"))?;
    let roots = load_roots(ca_file.as_deref(), ca_dir.as_deref())
        .map_err(|e| format!("Failed to configure CA certificate(s) file/directory: {e}"))?;
    if let Some(dh) = opt(config, "tls-dh-params-file") {
        check_dh_params(&dh)?;
    }
    let roots = Arc::new(roots);

    let identity = Arc::new(SingleCertAndKey::from(certified_key(
        &provider, certs, key, &key_file,
    )?));
    let server_for = |verifier: Arc<dyn rustls::server::danger::ClientCertVerifier>| {
        let mut sc = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&versions)
            .map_err(|e| format!("Failed to configure protocols: {e}"))?
            .with_client_cert_verifier(verifier)
            .with_cert_resolver(identity.clone());
        sc.ignore_client_order = config.stored_bool("tls-prefer-server-ciphers");
        let cache_size = config.stored_i64("tls-session-cache-size");
        if config.stored_bool("tls-session-caching") {
            // OpenSSL reads a size of 0 as "no limit"; rustls's cache needs a bound.
            let size = if cache_size <= 0 {
                1 << 20
            } else {
                cache_size as usize
            };
            sc.session_storage = ServerSessionMemoryCache::new(size);
        } else {
            sc.session_storage = Arc::new(NoServerSessionStorage {});
            sc.send_tls13_tickets = 0;
        }
        Ok::<_, String>(Arc::new(sc))
    };
    let mut servers = [None, None, None];
    servers[ClientAuth::No as usize] = Some(server_for(WebPkiClientVerifier::no_client_auth())?);
    if !roots.is_empty() {
        let required = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
            .build()
            .map_err(|e| format!("Failed to configure CA certificate(s) file/directory: {e}"))?;
        let optional = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
            .allow_unauthenticated()
            .build()
            .map_err(|e| format!("Failed to configure CA certificate(s) file/directory: {e}"))?;
        servers[ClientAuth::Yes as usize] = Some(server_for(required)?);
        servers[ClientAuth::Optional as usize] = Some(server_for(optional)?);
    }

    // The client side presents tls-client-cert-file/key when both are set, else the
    // server's own certificate, as Redis's client context falls back.
    let client_identity = match (
        opt(config, "tls-client-cert-file"),
        opt(config, "tls-client-key-file"),
    ) {
        (Some(cf), Some(kf)) => {
            let certs =
                load_certs(&cf).map_err(|e| format!("Failed to load certificate: {cf}: {e}"))?;
            let key = load_key(&kf, opt(config, "tls-client-key-file-pass").as_deref())
                .map_err(|e| format!("Failed to load private key: {kf}: {e}"))?;
            Arc::new(SingleCertAndKey::from(certified_key(
                &provider, certs, key, &kf,
            )?))
        }
        _ => identity.clone(),
    };
    let verifier: Arc<dyn ServerCertVerifier> = if roots.is_empty() {
        Arc::new(RefuseAll(provider.clone()))
    } else {
        Arc::new(ChainOnly(
            rustls::client::WebPkiServerVerifier::builder_with_provider(
                roots.clone(),
                provider.clone(),
            )
            .build()
            .map_err(|e| format!("Failed to configure CA certificate(s) file/directory: {e}"))?,
        ))
    };
    let client = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| format!("Failed to configure protocols: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_client_cert_resolver(client_identity);
    Ok(TlsContext {
        servers,
        client: Arc::new(client),
    })
}

/// `tls-protocols`: the words Redis accepts; rustls speaks TLSv1.2 and TLSv1.3 only,
/// so a list naming neither cannot be served and fails as a configuration error.
fn protocols(
    value: Option<&str>,
) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, String> {
    let Some(value) = value else {
        return Ok(vec![&rustls::version::TLS13, &rustls::version::TLS12]);
    };
    let mut v12 = false;
    let mut v13 = false;
    let mut legacy = false;
    for word in value.split(' ').filter(|w| !w.is_empty()) {
        match word.to_ascii_lowercase().as_str() {
            "tlsv1" | "tlsv1.1" => legacy = true,
            "tlsv1.2" => v12 = true,
            "tlsv1.3" => v13 = true,
            _ => {
                return Err("Invalid tls-protocols specified. Use a combination of 'TLSv1', 'TLSv1.1', 'TLSv1.2' and 'TLSv1.3'.".into())
            }
        }
    }
    if legacy && (v12 || v13) {
        crate::log::warning("tls-protocols: TLSv1 and TLSv1.1 are not supported and are ignored");
    }
    let mut out: Vec<&'static rustls::SupportedProtocolVersion> = Vec::new();
    if v13 {
        out.push(&rustls::version::TLS13);
    }
    if v12 {
        out.push(&rustls::version::TLS12);
    }
    if out.is_empty() {
        return Err(
            "Invalid tls-protocols specified. Only TLSv1.2 and TLSv1.3 are supported.".into(),
        );
    }
    Ok(out)
}

/// A certificate chain with its key, refused when the key is not the certificate's
/// (OpenSSL's "key values mismatch"). A certificate rustls cannot parse for the
/// comparison (X.509 v1, which Redis's own test certificates include) is served as is.
fn certified_key(
    provider: &Arc<CryptoProvider>,
    certs: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    key_file: &str,
) -> Result<Arc<CertifiedKey>, String> {
    let signer = provider
        .key_provider
        .load_private_key(key)
        .map_err(|e| format!("Failed to load private key: {key_file}: {e}"))?;
    let ck = CertifiedKey::new(certs, signer);
    match ck.keys_match() {
        Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch)) => Err(
            format!("Failed to load private key: {key_file}: key values mismatch"),
        ),
        _ => Ok(Arc::new(ck)),
    }
}

fn load_certs(path: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let data = std::fs::read(path).map_err(|e| crate::config::strerror(&e))?;
    let certs: Vec<_> = CertificateDer::pem_slice_iter(&data)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{e:?}"))?;
    if certs.is_empty() {
        return Err("no certificate in PEM file".into());
    }
    Ok(certs)
}

/// A PEM private key: PKCS#8, PKCS#1 (RSA) or SEC1 (EC) in the clear, or encrypted
/// PKCS#8 (`ENCRYPTED PRIVATE KEY`, PBES2) opened with `pass`.
fn load_key(path: &str, pass: Option<&str>) -> Result<PrivateKeyDer<'static>, String> {
    let data = std::fs::read(path).map_err(|e| crate::config::strerror(&e))?;
    if let Ok(key) = PrivateKeyDer::from_pem_slice(&data) {
        return Ok(key);
    }
    cert::decrypt_pkcs8(&data, pass)
}

/// Certificates of `tls-ca-cert-file` and of every PEM file in `tls-ca-cert-dir`.
fn load_roots(file: Option<&str>, dir: Option<&str>) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    if let Some(file) = file {
        for c in load_certs(file).map_err(|e| format!("{file}: {e}"))? {
            roots.add(c).map_err(|e| format!("{file}: {e}"))?;
        }
    }
    if let Some(dir) = dir {
        let entries = std::fs::read_dir(dir)
            .map_err(|e| format!("{dir}: {}", crate::config::strerror(&e)))?;
        for entry in entries.flatten() {
            let Ok(data) = std::fs::read(entry.path()) else {
                continue;
            };
            for c in CertificateDer::pem_slice_iter(&data).flatten() {
                let _ = roots.add(c);
            }
        }
    }
    Ok(roots)
}

/// `tls-dh-params-file` must name a readable DH parameters file, as Redis refuses
/// one it cannot load; rustls negotiates ECDHE only, so the parameters are unused.
fn check_dh_params(path: &str) -> Result<(), String> {
    let data = std::fs::read_to_string(path)
        .map_err(|e| format!("Failed to load {path}: {}", crate::config::strerror(&e)))?;
    if !data.contains("-----BEGIN DH PARAMETERS-----")
        && !data.contains("-----BEGIN X9.42 DH PARAMETERS-----")
    {
        return Err(format!("{path}: failed to read DH params."));
    }
    Ok(())
}

/// Verifies the server's chain against the CA but not its name: Redis's client
/// context (replication, cluster bus) checks the chain only.
#[derive(Debug)]
struct ChainOnly(Arc<rustls::client::WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        use rustls::{CertificateError, Error};
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// No CA configured (possible only with neither TLS replication nor a TLS bus):
/// the client side then trusts no server.
#[derive(Debug)]
struct RefuseAll(Arc<CryptoProvider>);

impl ServerCertVerifier for RefuseAll {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Err(rustls::Error::InvalidCertificate(
            rustls::CertificateError::UnknownIssuer,
        ))
    }

    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Err(rustls::Error::General("no CA configured".into()))
    }

    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Err(rustls::Error::General("no CA configured".into()))
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocols_follow_redis_words() {
        assert_eq!(protocols(None).unwrap().len(), 2);
        assert_eq!(protocols(Some("TLSv1.3")).unwrap().len(), 1);
        assert_eq!(protocols(Some("tlsv1.2 TLSv1.3")).unwrap().len(), 2);
        assert_eq!(protocols(Some("TLSv1 TLSv1.2")).unwrap().len(), 1);
        assert!(protocols(Some("TLSv1")).is_err());
        assert!(protocols(Some("TLSv1 TLSv1.1")).is_err());
        assert!(protocols(Some("SSLv3"))
            .unwrap_err()
            .starts_with("Invalid tls-protocols"));
    }
}
