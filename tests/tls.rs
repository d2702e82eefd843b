//! TLS (`tls-port` and the `tls-*` directives): clients over TLS with exact replies
//! (a raw rustls client, redis-cli, redis-py), refused handshakes, client
//! certificates (`tls-auth-clients`, `tls-auth-clients-user CN`), reloading the
//! certificate with CONFIG SET, startup errors, and replication over TLS with Debian's
//! redis-server both ways. Certificates are made by the `openssl` command in a
//! temporary directory; every test skips (with a note) where it is missing, as the
//! redis-server and client tests do where those are.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;

fn have(cmd: &str, arg: &str) -> bool {
    Command::new(cmd)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA, server and client certificates it signs (v3, with the loopback address as
/// subject alternative name), and a second, unrelated CA with a certificate of its own.
struct Certs {
    dir: PathBuf,
}

impl Certs {
    fn make() -> Option<Certs> {
        if !have("openssl", "version") {
            eprintln!("openssl is not installed: skipping");
            return None;
        }
        let dir = temp_dir("tls-certs");
        std::fs::write(
            dir.join("ext.cnf"),
            "subjectAltName=DNS:localhost,IP:127.0.0.1\n",
        )
        .unwrap();
        for ca in ["ca", "ca2"] {
            openssl(
                &dir,
                &[
                    "req",
                    "-x509",
                    "-newkey",
                    "rsa:2048",
                    "-nodes",
                    "-keyout",
                    &format!("{ca}.key"),
                    "-out",
                    &format!("{ca}.crt"),
                    "-days",
                    "30",
                    "-subj",
                    &format!("/O=Cinnabar Test/CN={ca}"),
                ],
            );
        }
        for (name, ca) in [
            ("server", "ca"),
            ("server2", "ca"),
            ("client", "ca"),
            ("alice", "ca"),
            ("stray", "ca2"),
        ] {
            openssl(
                &dir,
                &[
                    "req",
                    "-newkey",
                    "rsa:2048",
                    "-nodes",
                    "-keyout",
                    &format!("{name}.key"),
                    "-out",
                    &format!("{name}.csr"),
                    "-subj",
                    &format!("/O=Cinnabar Test/CN={name}"),
                ],
            );
            openssl(
                &dir,
                &[
                    "x509",
                    "-req",
                    "-in",
                    &format!("{name}.csr"),
                    "-CA",
                    &format!("{ca}.crt"),
                    "-CAkey",
                    &format!("{ca}.key"),
                    "-CAcreateserial",
                    "-out",
                    &format!("{name}.crt"),
                    "-days",
                    "30",
                    "-extfile",
                    "ext.cnf",
                ],
            );
        }
        Some(Certs { dir })
    }

    fn path(&self, file: &str) -> String {
        self.dir.join(file).display().to_string()
    }

    /// Directives for a TLS listener on `tls_port` with the server certificate.
    fn server_args(&self, tls_port: u16) -> Vec<String> {
        vec![
            "--tls-port".into(),
            tls_port.to_string(),
            "--tls-cert-file".into(),
            self.path("server.crt"),
            "--tls-key-file".into(),
            self.path("server.key"),
            "--tls-ca-cert-file".into(),
            self.path("ca.crt"),
        ]
    }
}

impl Drop for Certs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A Cinnabar with a plain port (for the harness) and a TLS port.
fn start_tls(certs: &Certs, extra: &[&str]) -> (TestServer, u16) {
    let tls_port = free_port();
    let mut args = certs.server_args(tls_port);
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    (TestServer::start_with(&args), tls_port)
}

fn client_config(
    certs: &Certs,
    ca: &str,
    identity: Option<&str>,
    tls12_only: bool,
) -> Arc<rustls::ClientConfig> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(certs.path(ca)).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let versions: &[&rustls::SupportedProtocolVersion] = if tls12_only {
        &[&rustls::version::TLS12]
    } else {
        &[&rustls::version::TLS13, &rustls::version::TLS12]
    };
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(roots);
    let config = match identity {
        Some(name) => builder
            .with_client_auth_cert(
                CertificateDer::pem_file_iter(certs.path(&format!("{name}.crt")))
                    .unwrap()
                    .map(|c| c.unwrap())
                    .collect(),
                PrivateKeyDer::from_pem_file(certs.path(&format!("{name}.key"))).unwrap(),
            )
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    Arc::new(config)
}

type Tls = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// A raw RESP connection over TLS: exact reply bytes, as `RawConn` over TCP.
struct TlsConn {
    reader: BufReader<Tls>,
}

impl TlsConn {
    /// Connects and completes the handshake; the error is the handshake's.
    fn try_connect(port: u16, config: Arc<rustls::ClientConfig>) -> std::io::Result<TlsConn> {
        let tcp = TcpStream::connect(("127.0.0.1", port))?;
        tcp.set_read_timeout(Some(Duration::from_secs(10)))?;
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
        let conn = rustls::ClientConnection::new(config, name).map_err(std::io::Error::other)?;
        let mut tls = rustls::StreamOwned::new(conn, tcp);
        while tls.conn.is_handshaking() {
            tls.conn.complete_io(&mut tls.sock)?;
        }
        let mut c = TlsConn {
            reader: BufReader::new(tls),
        };
        // TLSv1.3 lets the client finish before the server checked its certificate:
        // a PING proves the server kept the connection.
        c.send(&["PING"]);
        let mut line = Vec::new();
        c.reader.read_until(b'\n', &mut line)?;
        if line != b"+PONG\r\n" {
            return Err(std::io::Error::other(format!(
                "no PONG: {:?}",
                String::from_utf8_lossy(&line)
            )));
        }
        Ok(c)
    }

    fn connect(port: u16, config: Arc<rustls::ClientConfig>) -> TlsConn {
        Self::try_connect(port, config).expect("TLS connection")
    }

    fn peer_common_name(&self) -> String {
        let der = self.reader.get_ref().conn.peer_certificates().unwrap()[0].to_vec();
        let text = String::from_utf8_lossy(&der).into_owned();
        ["server2", "server"]
            .into_iter()
            .find(|n| text.contains(n))
            .unwrap_or("?")
            .to_string()
    }

    fn send_bytes(&mut self, args: &[&[u8]]) {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        self.write_raw(&out);
    }

    fn write_raw(&mut self, data: &[u8]) {
        let s = self.reader.get_mut();
        s.write_all(data).unwrap();
        s.flush().unwrap();
    }

    fn send(&mut self, args: &[&str]) {
        self.send_bytes(&args.iter().map(|a| a.as_bytes()).collect::<Vec<_>>());
    }

    fn cmd(&mut self, args: &[&str]) -> String {
        self.send(args);
        self.read_reply()
    }

    fn read_reply(&mut self) -> String {
        let mut out = Vec::new();
        self.read_frame(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    fn read_frame(&mut self, out: &mut Vec<u8>) {
        let mut line = Vec::new();
        self.reader.read_until(b'\n', &mut line).unwrap();
        assert!(!line.is_empty(), "connection closed");
        out.extend_from_slice(&line);
        let body = std::str::from_utf8(&line[1..line.len() - 2]).unwrap_or("0");
        match line[0] {
            b'$' | b'=' | b'!' => {
                let n: i64 = body.parse().unwrap();
                if n >= 0 {
                    let mut buf = vec![0; n as usize + 2];
                    self.reader.read_exact(&mut buf).unwrap();
                    out.extend_from_slice(&buf);
                }
            }
            b'*' | b'~' | b'>' => {
                for _ in 0..body.parse::<i64>().unwrap().max(0) {
                    self.read_frame(out);
                }
            }
            b'%' | b'|' => {
                for _ in 0..body.parse::<i64>().unwrap() * 2 {
                    self.read_frame(out);
                }
            }
            _ => {}
        }
    }
}

/// redis-cli over TLS; (stdout, success).
fn redis_cli(certs: &Certs, port: u16, identity: Option<&str>, args: &[&str]) -> (String, bool) {
    let mut cmd = Command::new("redis-cli");
    cmd.args([
        "-p",
        &port.to_string(),
        "--tls",
        "--cacert",
        &certs.path("ca.crt"),
    ]);
    if let Some(name) = identity {
        cmd.args([
            "--cert",
            &certs.path(&format!("{name}.crt")),
            "--key",
            &certs.path(&format!("{name}.key")),
        ]);
    }
    let out = cmd.args(args).output().expect("redis-cli runs");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.success(),
    )
}

#[test]
fn redis_cli_over_tls() {
    let Some(certs) = Certs::make() else { return };
    if !have("redis-cli", "--version") {
        eprintln!("redis-cli is not installed: skipping");
        return;
    }
    let (_s, port) = start_tls(&certs, &[]);
    let run = |args: &[&str]| redis_cli(&certs, port, Some("client"), args).0;
    assert_eq!(run(&["PING"]), "PONG\n");
    assert_eq!(run(&["SET", "greeting", "hello"]), "OK\n");
    assert_eq!(run(&["GET", "greeting"]), "hello\n");
    assert_eq!(run(&["-3", "HGETALL", "none"]), "\n");
}

#[test]
fn exact_replies_pipelining_and_big_values_over_tls() {
    let Some(certs) = Certs::make() else { return };
    let (s, port) = start_tls(&certs, &[]);
    let config = client_config(&certs, "ca.crt", Some("client"), false);
    let mut c = TlsConn::connect(port, config.clone());
    assert_eq!(c.cmd(&["SET", "k", "v"]), "+OK\r\n");
    assert_eq!(c.cmd(&["GET", "k"]), "$1\r\nv\r\n");
    assert_eq!(
        c.cmd(&["INCR", "k"]),
        "-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(c.cmd(&["HSET", "h", "f", "1"]), ":1\r\n");
    // RESP3 on the same connection.
    assert!(c.cmd(&["HELLO", "3"]).starts_with("%7\r\n$6\r\nserver\r\n"));
    assert_eq!(c.cmd(&["HGETALL", "h"]), "%1\r\n$1\r\nf\r\n$1\r\n1\r\n");
    assert_eq!(c.cmd(&["HELLO", "2"]).get(..3), Some("*14"));

    // A large pipelined batch, written at once.
    let mut batch = Vec::new();
    for i in 0..20_000 {
        let (k, v) = (format!("key:{i}"), format!("value:{i}"));
        batch.extend_from_slice(
            format!(
                "*3\r\n$3\r\nSET\r\n${}\r\n{k}\r\n${}\r\n{v}\r\n",
                k.len(),
                v.len()
            )
            .as_bytes(),
        );
        batch.extend_from_slice(format!("*2\r\n$3\r\nGET\r\n${}\r\n{k}\r\n", k.len()).as_bytes());
    }
    c.write_raw(&batch);
    for i in 0..20_000 {
        assert_eq!(c.read_reply(), "+OK\r\n");
        let v = format!("value:{i}");
        assert_eq!(c.read_reply(), format!("${}\r\n{v}\r\n", v.len()));
    }

    // A 1 MB value both ways; the same bytes come back over plain TCP too.
    let big: Vec<u8> = (0..1024 * 1024).map(|i| (i % 251) as u8).collect();
    c.send_bytes(&[b"SET", b"big", &big]);
    assert_eq!(c.read_reply(), "+OK\r\n");
    c.send_bytes(&[b"GET", b"big"]);
    let mut head = Vec::new();
    c.reader.read_until(b'\n', &mut head).unwrap();
    assert_eq!(head, format!("${}\r\n", big.len()).as_bytes());
    let mut body = vec![0; big.len() + 2];
    c.reader.read_exact(&mut body).unwrap();
    assert_eq!(&body[..big.len()], &big[..]);
    assert_eq!(s.raw(2).cmd(&["STRLEN", "big"]), ":1048576\r\n");
    // Many TLS clients at once.
    let mut clients: Vec<TlsConn> = (0..20)
        .map(|_| TlsConn::connect(port, config.clone()))
        .collect();
    for (i, c) in clients.iter_mut().enumerate() {
        assert_eq!(c.cmd(&["INCR", "counter"]), format!(":{}\r\n", i + 1));
    }
}

#[test]
fn pubsub_blocking_and_monitor_over_tls() {
    let Some(certs) = Certs::make() else { return };
    let (s, port) = start_tls(&certs, &[]);
    let config = client_config(&certs, "ca.crt", Some("client"), false);
    let mut sub = TlsConn::connect(port, config.clone());
    assert_eq!(
        sub.cmd(&["SUBSCRIBE", "news"]),
        "*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n"
    );
    let mut monitor = TlsConn::connect(port, config.clone());
    assert_eq!(monitor.cmd(&["MONITOR"]), "+OK\r\n");
    let mut plain = s.raw(2);
    assert_eq!(plain.cmd(&["PUBLISH", "news", "hello"]), ":1\r\n");
    assert_eq!(
        sub.read_reply(),
        "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$5\r\nhello\r\n"
    );
    assert!(monitor
        .read_reply()
        .ends_with("\"PUBLISH\" \"news\" \"hello\"\r\n"));

    let mut waiter = TlsConn::connect(port, config.clone());
    waiter.send(&["BLPOP", "queue", "0"]);
    wait_blocked(&s, 1);
    let mut pusher = TlsConn::connect(port, config);
    assert_eq!(pusher.cmd(&["RPUSH", "queue", "job"]), ":1\r\n");
    assert_eq!(waiter.read_reply(), "*2\r\n$5\r\nqueue\r\n$3\r\njob\r\n");
}

/// The handshake fails, or the server drops the connection right after it.
fn refused(port: u16, config: Arc<rustls::ClientConfig>) -> bool {
    TlsConn::try_connect(port, config).is_err()
}

#[test]
fn handshakes_refused_as_configured() {
    let Some(certs) = Certs::make() else { return };
    let (s, port) = start_tls(&certs, &[]);
    // tls-auth-clients yes (the default): a certificate is required, and it must
    // come from the CA.
    assert!(refused(port, client_config(&certs, "ca.crt", None, false)));
    assert!(refused(
        port,
        client_config(&certs, "ca.crt", Some("stray"), false)
    ));
    // A client that trusts another CA refuses the server.
    assert!(refused(
        port,
        client_config(&certs, "ca2.crt", Some("client"), false)
    ));
    assert!(!refused(
        port,
        client_config(&certs, "ca.crt", Some("client"), false)
    ));

    let mut admin = s.raw(2);
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "tls-auth-clients", "optional"]),
        "+OK\r\n"
    );
    assert!(!refused(port, client_config(&certs, "ca.crt", None, false)));
    assert!(refused(
        port,
        client_config(&certs, "ca.crt", Some("stray"), false)
    ));
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "tls-auth-clients", "no"]),
        "+OK\r\n"
    );
    assert!(!refused(port, client_config(&certs, "ca.crt", None, false)));

    // TLSv1.3 only: a TLSv1.2 client is refused.
    assert!(!refused(port, client_config(&certs, "ca.crt", None, true)));
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "tls-protocols", "TLSv1.3"]),
        "+OK\r\n"
    );
    assert!(refused(port, client_config(&certs, "ca.crt", None, true)));
    let out = Command::new("openssl")
        .args([
            "s_client",
            "-tls1_2",
            "-connect",
            &format!("127.0.0.1:{port}"),
        ])
        .args(["-CAfile", &certs.path("ca.crt")])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Cipher is (NONE)"), "{text}");
    assert!(!refused(port, client_config(&certs, "ca.crt", None, false)));
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "tls-protocols", "TLSv1.1"]),
        "-ERR CONFIG SET failed (possibly related to argument 'tls-protocols') - Unable to update TLS configuration. Check server logs.\r\n"
    );
    assert_eq!(
        admin.cmd(&["CONFIG", "GET", "tls-protocols"]),
        "*2\r\n$13\r\ntls-protocols\r\n$7\r\nTLSv1.3\r\n"
    );
}

#[test]
fn plain_tcp_on_the_tls_port_gets_no_reply() {
    let Some(certs) = Certs::make() else { return };
    let (_s, port) = start_tls(&certs, &[]);
    let mut tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    tcp.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
    let mut got = Vec::new();
    let _ = tcp.read_to_end(&mut got);
    // Closed without a reply, as OpenSSL does with bytes that are no TLS.
    assert_eq!(got, b"");
}

#[test]
fn config_set_reloads_the_certificate_for_new_connections() {
    let Some(certs) = Certs::make() else { return };
    let (s, port) = start_tls(&certs, &[]);
    let config = client_config(&certs, "ca.crt", Some("client"), false);
    let mut before = TlsConn::connect(port, config.clone());
    assert_eq!(before.peer_common_name(), "server");
    let mut admin = s.raw(2);
    assert_eq!(
        admin.cmd(&[
            "CONFIG",
            "SET",
            "tls-cert-file",
            &certs.path("server2.crt"),
            "tls-key-file",
            &certs.path("server2.key"),
        ]),
        "+OK\r\n"
    );
    let after = TlsConn::connect(port, config.clone());
    assert_eq!(after.peer_common_name(), "server2");
    // The connection made before goes on.
    assert_eq!(before.cmd(&["PING"]), "+PONG\r\n");

    // A file that does not load: Redis's error, and nothing changes.
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "tls-cert-file", "/nonexistent/cert.pem"]),
        "-ERR CONFIG SET failed (possibly related to argument 'tls-cert-file') - Unable to update TLS configuration. Check server logs.\r\n"
    );
    // A certificate that does not match the key.
    assert!(admin
        .cmd(&["CONFIG", "SET", "tls-cert-file", &certs.path("server.crt")])
        .starts_with("-ERR CONFIG SET failed (possibly related to argument 'tls-cert-file')"));
    let get = admin.cmd(&["CONFIG", "GET", "tls-cert-file"]);
    assert!(get.contains("server2.crt"), "{get}");
    assert_eq!(TlsConn::connect(port, config).peer_common_name(), "server2");
}

#[test]
fn tls_port_binds_and_closes_with_config_set() {
    let Some(certs) = Certs::make() else { return };
    let (s, port) = start_tls(&certs, &[]);
    let config = client_config(&certs, "ca.crt", Some("client"), false);
    let mut admin = s.raw(2);
    let new_port = free_port();
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "tls-port", &new_port.to_string()]),
        "+OK\r\n"
    );
    assert_eq!(
        TlsConn::connect(new_port, config.clone()).cmd(&["PING"]),
        "+PONG\r\n"
    );
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
    let info = admin.cmd(&["INFO", "server"]);
    assert!(
        info.contains(&format!(
            "listener2:name=tls,bind=127.0.0.1,port={new_port}\r\n"
        )),
        "{info}"
    );
    assert_eq!(admin.cmd(&["CONFIG", "SET", "tls-port", "0"]), "+OK\r\n");
    assert!(TcpStream::connect(("127.0.0.1", new_port)).is_err());
}

#[test]
fn client_certificate_common_name_names_the_user() {
    let Some(certs) = Certs::make() else { return };
    let (s, port) = start_tls(&certs, &["--tls-auth-clients-user", "CN"]);
    let mut admin = s.raw(2);
    assert_eq!(
        admin.cmd(&["CONFIG", "GET", "tls-auth-clients-user"]),
        "*2\r\n$21\r\ntls-auth-clients-user\r\n$2\r\nCN\r\n"
    );
    assert_eq!(
        admin.cmd(&["ACL", "SETUSER", "alice", "on", "nopass", "+@all", "~*"]),
        "+OK\r\n"
    );
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "requirepass", "secret"]),
        "+OK\r\n"
    );
    let alice = client_config(&certs, "ca.crt", Some("alice"), false);
    let mut c = TlsConn::connect(port, alice.clone());
    assert_eq!(c.cmd(&["ACL", "WHOAMI"]), "$5\r\nalice\r\n");
    assert_eq!(c.cmd(&["SET", "k", "v"]), "+OK\r\n");
    // No user named by the CN: the connection is not authenticated.
    let err = TlsConn::try_connect(port, client_config(&certs, "ca.crt", Some("client"), false));
    assert!(err.is_err_and(|e| e.to_string().contains("NOAUTH")));
    // A disabled user is not logged in either.
    let mut admin = s.raw(2);
    assert_eq!(admin.cmd(&["AUTH", "secret"]), "+OK\r\n");
    assert_eq!(admin.cmd(&["ACL", "SETUSER", "alice", "off"]), "+OK\r\n");
    assert!(TlsConn::try_connect(port, alice.clone()).is_err());
    // Off: certificates name no user.
    assert_eq!(admin.cmd(&["ACL", "SETUSER", "alice", "on"]), "+OK\r\n");
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "tls-auth-clients-user", "off"]),
        "+OK\r\n"
    );
    assert!(TlsConn::try_connect(port, alice).is_err());
}

/// A server process killed when dropped, so a failing assertion leaves none behind.
struct Spawned(std::process::Child);

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts cinnabar with `args` and waits for it to exit; its status and log.
fn start_expecting_exit(args: &[String]) -> (Option<i32>, String) {
    let dir = temp_dir("tls-exit");
    let log = dir.join("log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_cinnabar"))
        .args(args)
        .args([
            "--logfile",
            &log.display().to_string(),
            "--dir",
            &dir.display().to_string(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Ok(Some(st)) = child.try_wait() {
            break st.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    (status, text)
}

#[test]
fn bad_tls_configuration_stops_startup() {
    let Some(certs) = Certs::make() else { return };
    let base = |extra: &[&str]| {
        let mut a = vec!["--port".to_string(), "0".into()];
        a.extend(certs.server_args(free_port()));
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let (code, log) = start_expecting_exit(&base(&["--tls-protocols", "TLSv1 TLSv1.1"]));
    assert_eq!(code, Some(1));
    assert!(log.contains("Invalid tls-protocols specified."), "{log}");
    assert!(
        log.contains("Failed to configure TLS. Check logs for more info."),
        "{log}"
    );
    let (code, log) = start_expecting_exit(&base(&["--tls-key-file", "/nonexistent.key"]));
    assert_eq!(code, Some(1));
    assert!(
        log.contains("Failed to load private key: /nonexistent.key: No such file or directory"),
        "{log}"
    );
    let (code, log) = start_expecting_exit(&base(&["--tls-ca-cert-file", ""]));
    assert_eq!(code, Some(1));
    assert!(log.contains("Either tls-ca-cert-file or tls-ca-cert-dir must be specified when tls-cluster, tls-replication or tls-auth-clients are enabled!"), "{log}");
    let (code, log) = start_expecting_exit(&base(&["--tls-ciphers", "RC4-MD5"]));
    assert_eq!(code, Some(1));
    assert!(
        log.contains("Failed to configure ciphers: RC4-MD5"),
        "{log}"
    );
    let (code, log) = start_expecting_exit(&base(&["--tls-dh-params-file", &certs.path("ca.crt")]));
    assert_eq!(code, Some(1));
    assert!(log.contains("failed to read DH params."), "{log}");
}

#[test]
fn tls_only_server_and_encrypted_key() {
    let Some(certs) = Certs::make() else { return };
    openssl(
        &certs.dir,
        &[
            "pkcs8",
            "-topk8",
            "-v2",
            "aes-256-cbc",
            "-in",
            "server.key",
            "-out",
            "server-enc.key",
            "-passout",
            "pass:s3cret",
        ],
    );
    let dir = temp_dir("tls-only");
    let tls_port = free_port();
    let mut args = vec!["--port".to_string(), "0".into(), "--dir".into()];
    args.push(dir.display().to_string());
    args.extend(certs.server_args(tls_port));
    args.extend(
        [
            "--tls-key-file",
            &certs.path("server-enc.key"),
            "--tls-key-file-pass",
            "s3cret",
            "--tls-ciphersuites",
            "TLS_CHACHA20_POLY1305_SHA256",
        ]
        .map(String::from),
    );
    let child = Spawned(
        Command::new(env!("CARGO_BIN_EXE_cinnabar"))
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let config = client_config(&certs, "ca.crt", Some("client"), false);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut conn = None;
    while conn.is_none() && Instant::now() < deadline {
        conn = TlsConn::try_connect(tls_port, config.clone()).ok();
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut c = conn.expect("TLS-only server serves");
    let suite = c.reader.get_ref().conn.negotiated_cipher_suite().unwrap();
    assert_eq!(
        suite.suite(),
        rustls::CipherSuite::TLS13_CHACHA20_POLY1305_SHA256
    );
    let info = c.cmd(&["INFO", "server"]);
    assert!(info.contains(&format!("tcp_port:{tls_port}\r\n")), "{info}");
    assert!(!info.contains("listener0:"), "{info}");
    let get = c.cmd(&["CONFIG", "GET", "tls-key-file-pass"]);
    assert_eq!(get, "*2\r\n$17\r\ntls-key-file-pass\r\n$6\r\ns3cret\r\n");
    drop(child);
    let _ = std::fs::remove_dir_all(&dir);

    // The wrong password: the key does not load.
    let mut bad = args.clone();
    let i = bad.iter().position(|a| a == "s3cret").unwrap();
    bad[i] = "wrong".into();
    bad[2] = "--save".into();
    bad[3] = "".into();
    let (code, log) = start_expecting_exit(&bad);
    assert_eq!(code, Some(1));
    assert!(log.contains("Failed to load private key:"), "{log}");
}

#[test]
fn config_file_and_rewrite_keep_the_tls_directives() {
    let Some(certs) = Certs::make() else { return };
    let dir = temp_dir("tls-rewrite");
    let tls_port = free_port();
    let conf = dir.join("cinnabar.conf");
    std::fs::write(
        &conf,
        format!(
            "tls-port {tls_port}\ntls-cert-file {}\ntls-key-file {}\ntls-ca-cert-file {}\ntls-auth-clients optional\n",
            certs.path("server.crt"),
            certs.path("server.key"),
            certs.path("ca.crt")
        ),
    )
    .unwrap();
    let port = free_port();
    let child = Spawned(
        Command::new(env!("CARGO_BIN_EXE_cinnabar"))
            .arg(&conf)
            .args(["--port", &port.to_string()])
            .args(["--dir", &dir.display().to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let config = client_config(&certs, "ca.crt", None, false);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut conn = None;
    while conn.is_none() && Instant::now() < deadline {
        conn = TlsConn::try_connect(tls_port, config.clone()).ok();
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut c = conn.expect("server from the config file serves TLS");
    assert_eq!(
        c.cmd(&[
            "CONFIG",
            "SET",
            "tls-session-caching",
            "no",
            "tls-ciphers",
            "ECDHE-RSA-AES128-GCM-SHA256"
        ]),
        "+OK\r\n"
    );
    assert_eq!(c.cmd(&["CONFIG", "REWRITE"]), "+OK\r\n");
    let text = std::fs::read_to_string(&conf).unwrap();
    for line in [
        format!("tls-port {tls_port}"),
        "tls-auth-clients optional".into(),
        "tls-session-caching no".into(),
        "tls-ciphers \"ECDHE-RSA-AES128-GCM-SHA256\"".into(),
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in:\n{text}");
    }
    drop(child);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn redis_py_over_tls() {
    let Some(certs) = Certs::make() else { return };
    let have_py = Command::new("python3")
        .args(["-c", "import redis"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !have_py {
        eprintln!("redis-py is not installed: skipping");
        return;
    }
    let (_s, port) = start_tls(&certs, &[]);
    let script = r#"
import sys, redis
port, ca, cert, key = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
for protocol in (2, 3):
    r = redis.Redis(port=port, ssl=True, ssl_ca_certs=ca, ssl_certfile=cert,
                    ssl_keyfile=key, protocol=protocol, decode_responses=True)
    assert r.ping() is True
    assert r.set("py", "value") is True
    assert r.get("py") == "value"
    r.hset("pyh", mapping={"a": "1", "b": "2"})
    assert r.hgetall("pyh") == {"a": "1", "b": "2"}
    p = r.pipeline(transaction=True)
    for i in range(100):
        p.incr("pyc")
    assert p.execute()[-1] == 100 * (protocol - 1)
    r.delete("pyh")
print("ok")
"#;
    let out = Command::new("python3")
        .args(["-c", script, &port.to_string()])
        .args([
            certs.path("ca.crt"),
            certs.path("client.crt"),
            certs.path("client.key"),
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "ok\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A redis-server with TLS on `tls_port` and no plain port.
struct TlsRedis {
    child: std::process::Child,
    dir: PathBuf,
}

impl TlsRedis {
    fn start(certs: &Certs, tls_port: u16, extra: &[&str]) -> TlsRedis {
        let dir = temp_dir("tls-redis");
        let mut args = vec![
            "--port".to_string(),
            "0".into(),
            "--bind".into(),
            "127.0.0.1".into(),
            "--save".into(),
            "".into(),
            "--appendonly".into(),
            "no".into(),
            "--dir".into(),
            dir.display().to_string(),
            "--repl-diskless-sync-delay".into(),
            "0".into(),
            "--tls-replication".into(),
            "yes".into(),
        ];
        args.extend(certs.server_args(tls_port));
        args.extend(extra.iter().map(|s| s.to_string()));
        let child = Command::new("redis-server")
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        TlsRedis { child, dir }
    }
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Connects over TLS, retrying while the server starts.
fn connect_when_up(port: u16, config: &Arc<rustls::ClientConfig>) -> TlsConn {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match TlsConn::try_connect(port, config.clone()) {
            Ok(c) => return c,
            Err(e) if Instant::now() > deadline => panic!("no TLS server on {port}: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

fn wait_for(c: &mut TlsConn, args: &[&str], want: &str) {
    wait_until(|| c.cmd(args) == want);
}

#[test]
fn replication_over_tls_with_redis_server_both_ways() {
    let Some(certs) = Certs::make() else { return };
    if !redis_server_available() {
        eprintln!("redis-server is not installed: skipping");
        return;
    }
    let config = client_config(&certs, "ca.crt", Some("client"), false);

    // Cinnabar replicates a TLS redis-server (diskless and disk-based syncs).
    for diskless in ["yes", "no"] {
        let master_port = free_port();
        let _master = TlsRedis::start(&certs, master_port, &["--repl-diskless-sync", diskless]);
        let mut m = connect_when_up(master_port, &config);
        assert_eq!(m.cmd(&["SET", "before", "sync"]), "+OK\r\n");
        assert_eq!(m.cmd(&["RPUSH", "list", "a", "b"]), ":2\r\n");
        let (replica, _) = start_tls(
            &certs,
            &[
                "--tls-replication",
                "yes",
                "--replicaof",
                "127.0.0.1",
                &master_port.to_string(),
            ],
        );
        let mut r = replica.raw(2);
        wait_until(|| r.cmd(&["GET", "before"]) == "$4\r\nsync\r\n");
        assert_eq!(m.cmd(&["SET", "after", "stream"]), "+OK\r\n");
        wait_until(|| r.cmd(&["GET", "after"]) == "$6\r\nstream\r\n");
        assert_eq!(
            r.cmd(&["LRANGE", "list", "0", "-1"]),
            "*2\r\n$1\r\na\r\n$1\r\nb\r\n"
        );
        let info = r.cmd(&["INFO", "replication"]);
        assert!(info.contains("master_link_status:up"), "{info}");
    }

    // redis-server replicates Cinnabar over TLS.
    let (master, master_tls) = start_tls(&certs, &[]);
    let mut m = master.raw(2);
    assert_eq!(m.cmd(&["SET", "from", "cinnabar"]), "+OK\r\n");
    let big = "x".repeat(200_000);
    assert_eq!(m.cmd(&["SET", "big", &big]), "+OK\r\n");
    let replica_port = free_port();
    let _replica = TlsRedis::start(
        &certs,
        replica_port,
        &["--replicaof", "127.0.0.1", &master_tls.to_string()],
    );
    let mut r = connect_when_up(replica_port, &config);
    wait_for(&mut r, &["GET", "from"], "$8\r\ncinnabar\r\n");
    assert_eq!(r.cmd(&["STRLEN", "big"]), ":200000\r\n");
    assert_eq!(m.cmd(&["INCRBY", "n", "5"]), ":5\r\n");
    wait_for(&mut r, &["GET", "n"], "$1\r\n5\r\n");
    // The replica announced its TLS port.
    let info = m.cmd(&["INFO", "replication"]);
    assert!(
        info.contains(&format!(
            "slave0:ip=127.0.0.1,port={replica_port},state=online"
        )),
        "{info}"
    );
}

/// A cluster node with `tls-cluster yes`: its plain port (the harness's), TLS port
/// and bus port.
fn start_tls_node(certs: &Certs) -> (TestServer, u16, u16) {
    let bus = free_port();
    let bus_s = bus.to_string();
    let (s, tls) = start_tls(
        certs,
        &[
            "--cluster-enabled",
            "yes",
            "--cluster-port",
            &bus_s,
            "--tls-cluster",
            "yes",
            "--tls-replication",
            "yes",
            "--cluster-node-timeout",
            "3000",
        ],
    );
    (s, tls, bus)
}

#[test]
fn cluster_bus_over_tls_announces_tls_ports() {
    let Some(certs) = Certs::make() else { return };
    let nodes: Vec<(TestServer, u16, u16)> = (0..4).map(|_| start_tls_node(&certs)).collect();
    let config = client_config(&certs, "ca.crt", Some("client"), false);
    let mut first = TlsConn::connect(nodes[0].1, config.clone());
    let ranges = [("0", "5460"), ("5461", "10922"), ("10923", "16383")];
    for (i, (lo, hi)) in ranges.iter().enumerate() {
        let mut c = TlsConn::connect(nodes[i].1, config.clone());
        assert_eq!(c.cmd(&["CLUSTER", "ADDSLOTSRANGE", lo, hi]), "+OK\r\n");
    }
    for (_, tls, bus) in &nodes[1..] {
        let meet = first.cmd(&[
            "CLUSTER",
            "MEET",
            "127.0.0.1",
            &tls.to_string(),
            &bus.to_string(),
        ]);
        assert_eq!(meet, "+OK\r\n");
    }
    let id0 = first.cmd(&["CLUSTER", "MYID"]);
    let id0 = id0.lines().nth(1).unwrap().to_string();
    wait_until(|| {
        let mut r = nodes[3].0.raw(2);
        r.cmd(&["CLUSTER", "NODES"]).contains(&id0)
    });
    let mut replica = TlsConn::connect(nodes[3].1, config.clone());
    assert_eq!(replica.cmd(&["CLUSTER", "REPLICATE", &id0]), "+OK\r\n");
    for (s, _, _) in &nodes {
        let mut r = s.raw(2);
        wait_until(|| r.cmd(&["CLUSTER", "INFO"]).contains("cluster_state:ok"));
    }
    // The replica follows its master over TLS, at the master's TLS port.
    let mut r = nodes[3].0.raw(2);
    wait_until(|| {
        r.cmd(&["INFO", "replication"])
            .contains("master_link_status:up")
    });
    let info = r.cmd(&["INFO", "replication"]);
    assert!(
        info.contains(&format!("master_port:{}\r\n", nodes[0].1)),
        "{info}"
    );

    // TLS clients are shown TLS ports, plain clients plain ones; the bus port is the same.
    let over_tls = first.cmd(&["CLUSTER", "NODES"]);
    let over_tcp = nodes[0].0.raw(2).cmd(&["CLUSTER", "NODES"]);
    for (s, tls, bus) in &nodes {
        assert!(
            over_tls.contains(&format!(" 127.0.0.1:{tls}@{bus} ")),
            "{over_tls}"
        );
        assert!(
            over_tcp.contains(&format!(" 127.0.0.1:{}@{bus} ", s.port)),
            "{over_tcp}"
        );
    }
    let slots = first.cmd(&["CLUSTER", "SLOTS"]);
    assert!(
        slots.contains(&format!(":{}\r\n$40\r\n{id0}", nodes[0].1)),
        "{slots}"
    );
    // Redirections name the port of the client's kind. `foo` hashes to slot 12182.
    assert_eq!(
        first.cmd(&["GET", "foo"]),
        format!("-MOVED 12182 127.0.0.1:{}\r\n", nodes[2].1)
    );
    assert_eq!(
        nodes[0].0.raw(2).cmd(&["GET", "foo"]),
        format!("-MOVED 12182 127.0.0.1:{}\r\n", nodes[2].0.port)
    );
    let shards = first.cmd(&["CLUSTER", "SHARDS"]);
    assert!(
        shards.contains(&format!(
            "$4\r\nport\r\n:{}\r\n$8\r\ntls-port\r\n:{}\r\n",
            nodes[0].0.port, nodes[0].1
        )),
        "{shards}"
    );
    // nodes.conf keeps the TLS port as the main one and the plain port as an aux field.
    let conf = std::fs::read_to_string(nodes[0].0.dir.join("nodes.conf")).unwrap();
    assert!(
        conf.contains(&format!(
            "127.0.0.1:{}@{},,tcp-port={},",
            nodes[0].1, nodes[0].2, nodes[0].0.port
        )) || conf.contains(&format!(
            ":{}@{},,tcp-port={},",
            nodes[0].1, nodes[0].2, nodes[0].0.port
        )),
        "{conf}"
    );
}

#[test]
fn refused_tls_clients_get_the_error_after_the_handshake() {
    let Some(certs) = Certs::make() else { return };
    let (s, port) = start_tls(&certs, &[]);
    let mut admin = s.raw(2);
    assert_eq!(admin.cmd(&["CONFIG", "SET", "maxclients", "1"]), "+OK\r\n");
    let config = client_config(&certs, "ca.crt", Some("client"), false);
    let err = TlsConn::try_connect(port, config.clone()).err().unwrap();
    assert!(
        err.to_string()
            .contains(r#"no PONG: "-ERR max number of clients reached\r\n""#),
        "{err}"
    );
    assert_eq!(admin.cmd(&["CONFIG", "SET", "maxclients", "10"]), "+OK\r\n");
    assert_eq!(TlsConn::connect(port, config).cmd(&["PING"]), "+PONG\r\n");
    let info = admin.cmd(&["INFO", "stats"]);
    assert!(info.contains("rejected_connections:1\r\n"), "{info}");
}

/// A dual-channel full sync over TLS: both channels are TLS connections, the main
/// one parked while the image comes on the other.
#[test]
fn dual_channel_full_sync_over_tls() {
    let Some(certs) = Certs::make() else { return };
    let dual = [
        "--tls-replication",
        "yes",
        "--dual-channel-replication-enabled",
        "yes",
    ];
    let (master, master_tls) = start_tls(&certs, &dual);
    let mut m = master.raw(2);
    m.cmd(&["DEBUG", "POPULATE", "5000", "k", "64"]);
    m.cmd(&["DEBUG", "SNAPSHOT-MANUAL", "1"]);
    let port = master_tls.to_string();
    let mut args = dual.to_vec();
    args.extend(["--replicaof", "127.0.0.1", &port]);
    let (replica, _) = start_tls(&certs, &args);
    wait_until(|| {
        m.cmd(&["INFO", "replication"])
            .contains("state=bg_transfer")
    });
    // Written while the image is taken: it comes through the main channel.
    m.cmd(&["SET", "during", "image"]);
    wait_until(|| m.cmd(&["DEBUG", "SNAPSHOT-STEP", "64"]) == ":0\r\n");
    m.cmd(&["DEBUG", "SNAPSHOT-MANUAL", "0"]);
    wait_replica_synced(master.port, replica.port);
    let stats = m.cmd(&["INFO", "stats"]);
    assert!(stats.contains("sync_full:1\r\n"), "{stats}");
    assert!(stats.contains("sync_partial_ok:1\r\n"), "{stats}");
    let mut r = replica.raw(2);
    assert_eq!(r.cmd(&["GET", "during"]), "$5\r\nimage\r\n");
    assert_eq!(r.cmd(&["DBSIZE"]), ":5001\r\n");
}
