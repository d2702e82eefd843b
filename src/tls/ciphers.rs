//! `tls-ciphers` (TLSv1.2, an OpenSSL cipher list) and `tls-ciphersuites` (TLSv1.3)
//! mapped onto the suites rustls offers.
//!
//! A list's names are matched by their OpenSSL names; OpenSSL's group keywords
//! (`DEFAULT`, `HIGH`, `ALL`, `ECDHE`, `AESGCM`, …) select every suite of that kind
//! rustls has, `!NAME`/`-NAME` removes a suite, and `@STRENGTH`-style directives are
//! ignored. As with OpenSSL, a list that selects no suite at all is an error.

use rustls::crypto::ring::cipher_suite as cs;
use rustls::SupportedCipherSuite;

/// OpenSSL's names for rustls's TLSv1.2 suites.
const TLS12: &[(&str, SupportedCipherSuite)] = &[
    (
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "ECDHE-RSA-AES256-GCM-SHA384",
        cs::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "ECDHE-RSA-AES128-GCM-SHA256",
        cs::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "ECDHE-RSA-CHACHA20-POLY1305",
        cs::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
];

/// TLSv1.3 suites: OpenSSL uses the IANA names.
const TLS13: &[(&str, SupportedCipherSuite)] = &[
    ("TLS_AES_256_GCM_SHA384", cs::TLS13_AES_256_GCM_SHA384),
    ("TLS_AES_128_GCM_SHA256", cs::TLS13_AES_128_GCM_SHA256),
    (
        "TLS_CHACHA20_POLY1305_SHA256",
        cs::TLS13_CHACHA20_POLY1305_SHA256,
    ),
];

/// Whether an OpenSSL group keyword covers the suite of that OpenSSL name.
fn keyword_covers(word: &str, name: &str) -> Option<bool> {
    let w = word.to_ascii_uppercase();
    let covers = match w.as_str() {
        "DEFAULT"
        | "ALL"
        | "HIGH"
        | "COMPLEMENTOFDEFAULT"
        | "SECURE128"
        | "SECURE192"
        | "SUITEB128"
        | "SUITEB192"
        | "TLSV1.2"
        | "ECDHE"
        | "EECDH"
        | "KECDHE"
        | "AEAD" => true,
        "ECDSA" | "AECDSA" => name.contains("ECDSA"),
        "RSA" | "ARSA" => name.contains("-RSA-"),
        "AES" | "AESGCM" => name.contains("-AES"),
        "AES128" => name.contains("AES128"),
        "AES256" => name.contains("AES256"),
        "CHACHA20" => name.contains("CHACHA20"),
        "SHA256" => name.ends_with("SHA256") || name.contains("CHACHA20"),
        "SHA384" => name.ends_with("SHA384"),
        _ => return None,
    };
    Some(covers)
}

/// The TLSv1.2 suites an OpenSSL cipher list names, in rustls's order of preference.
fn select_tls12(list: &str) -> Result<Vec<SupportedCipherSuite>, String> {
    let mut on = [false; TLS12.len()];
    let mut banned = [false; TLS12.len()];
    for raw in list.split([':', ',', ' ']).filter(|w| !w.is_empty()) {
        let (remove, ban, word) = match raw.as_bytes()[0] {
            b'!' => (true, true, &raw[1..]),
            b'-' => (true, false, &raw[1..]),
            b'+' => (false, false, &raw[1..]),
            b'@' => continue,
            _ => (false, false, raw),
        };
        for (i, (name, _)) in TLS12.iter().enumerate() {
            // `A+B`: a suite every part covers.
            let hit = word.split('+').all(|part| {
                part.eq_ignore_ascii_case(name) || keyword_covers(part, name) == Some(true)
            });
            if !hit {
                continue;
            }
            if remove {
                on[i] = false;
                banned[i] |= ban;
            } else if !banned[i] {
                on[i] = true;
            }
        }
    }
    Ok(TLS12
        .iter()
        .zip(on)
        .filter(|(_, on)| *on)
        .map(|((_, s), _)| *s)
        .collect())
}

/// The TLSv1.3 suites of a colon-separated list of IANA names.
fn select_tls13(list: &str) -> Vec<SupportedCipherSuite> {
    list.split(':')
        .filter_map(|w| {
            TLS13
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(w.trim()))
                .map(|(_, s)| *s)
        })
        .collect()
}

/// The suites the provider offers: every rustls suite unless a list narrows its
/// protocol's suites. Errors are Redis's log lines.
pub fn select(
    ciphers: Option<&str>,
    ciphersuites: Option<&str>,
) -> Result<Vec<SupportedCipherSuite>, String> {
    let mut out: Vec<SupportedCipherSuite> = Vec::new();
    match ciphersuites {
        Some(list) => {
            let chosen = select_tls13(list);
            if chosen.is_empty() {
                return Err(format!("Failed to configure ciphersuites: {list}"));
            }
            out.extend(chosen);
        }
        None => out.extend(TLS13.iter().map(|(_, s)| *s)),
    }
    match ciphers {
        Some(list) => {
            let chosen = select_tls12(list)?;
            if chosen.is_empty() {
                return Err(format!("Failed to configure ciphers: {list}"));
            }
            out.extend(chosen);
        }
        None => out.extend(TLS12.iter().map(|(_, s)| *s)),
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openssl_lists_map_to_rustls_suites() {
        assert_eq!(select_tls12("DEFAULT").unwrap().len(), 6);
        assert_eq!(
            select_tls12("ECDHE-RSA-AES128-GCM-SHA256").unwrap().len(),
            1
        );
        assert_eq!(select_tls12("HIGH:!ECDSA").unwrap().len(), 3);
        assert_eq!(select_tls12("ECDHE+AESGCM:!AES128").unwrap().len(), 2);
        assert!(select_tls12("DES-CBC3-SHA").unwrap().is_empty());
        assert_eq!(select_tls13("TLS_AES_128_GCM_SHA256:TLS_NOPE").len(), 1);
        assert!(select(Some("RC4-MD5"), None).is_err());
        assert!(select(None, Some("TLS_AES_128_CCM_SHA256")).is_err());
        assert_eq!(select(None, None).unwrap().len(), 9);
    }
}
