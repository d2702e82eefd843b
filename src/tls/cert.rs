//! What TLS needs from certificates and keys beyond rustls: a certificate's subject
//! Common Name (`tls-auth-clients-user CN`) and encrypted PKCS#8 keys
//! (`tls-key-file-pass`).

use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

/// One DER element at the start of `data`: (tag, contents, rest).
fn der_element(data: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let tag = *data.first()?;
    let first = *data.get(1)?;
    let (len, header) = if first < 0x80 {
        (first as usize, 2)
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 {
            return None;
        }
        let mut len = 0usize;
        for &b in data.get(2..2 + n)? {
            len = (len << 8) | b as usize;
        }
        (len, 2 + n)
    };
    let body = data.get(header..header.checked_add(len)?)?;
    Some((tag, body, &data[header + len..]))
}

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID: u8 = 0x06;
/// id-at-commonName, 2.5.4.3.
const CN_OID: &[u8] = &[0x55, 0x04, 0x03];

/// The subject's Common Name of a DER certificate (the last CN, as OpenSSL's
/// lookups by index find them in order; a subject has one in practice).
pub fn common_name(cert: &[u8]) -> Option<String> {
    let (tag, certificate, _) = der_element(cert)?;
    if tag != SEQUENCE {
        return None;
    }
    let (tag, tbs, _) = der_element(certificate)?;
    if tag != SEQUENCE {
        return None;
    }
    let mut rest = tbs;
    // [0] version (optional), serial, signature algorithm, issuer, validity, subject.
    let (tag, _, after) = der_element(rest)?;
    if tag == 0xa0 {
        rest = after;
    }
    for _ in 0..4 {
        rest = der_element(rest)?.2;
    }
    let (tag, subject, _) = der_element(rest)?;
    if tag != SEQUENCE {
        return None;
    }
    let mut found = None;
    let mut rdns = subject;
    while !rdns.is_empty() {
        let (tag, set, next) = der_element(rdns)?;
        rdns = next;
        if tag != SET {
            continue;
        }
        let mut atvs = set;
        while !atvs.is_empty() {
            let (_, atv, next) = der_element(atvs)?;
            atvs = next;
            let (tag, oid, value) = der_element(atv)?;
            if tag == OID && oid == CN_OID {
                let (_, text, _) = der_element(value)?;
                found = Some(String::from_utf8_lossy(text).into_owned());
            }
        }
    }
    found
}

/// An `ENCRYPTED PRIVATE KEY` PEM block (PKCS#8 with PBES2), opened with `pass`.
pub fn decrypt_pkcs8(pem: &[u8], pass: Option<&str>) -> Result<PrivateKeyDer<'static>, String> {
    const BEGIN: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----";
    const END: &str = "-----END ENCRYPTED PRIVATE KEY-----";
    let text = String::from_utf8_lossy(pem);
    let (Some(start), Some(end)) = (text.find(BEGIN), text.find(END)) else {
        if text.contains("Proc-Type: 4,ENCRYPTED") {
            return Err("legacy encrypted PEM keys are not supported (use PKCS#8)".into());
        }
        return Err("no private key in PEM file".into());
    };
    if end < start {
        return Err("no private key in PEM file".into());
    }
    let block = &text[start..end + END.len()];
    let (_, der) = pkcs8::der::pem::decode_vec(block.as_bytes()).map_err(|e| e.to_string())?;
    let info =
        pkcs8::EncryptedPrivateKeyInfoRef::try_from(der.as_slice()).map_err(|e| e.to_string())?;
    let Some(pass) = pass else {
        return Err("encrypted private key and no password (tls-key-file-pass)".into());
    };
    let plain = info
        .decrypt(pass.as_bytes())
        .map_err(|_| "bad decrypt".to_string())?;
    Ok(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        plain.as_bytes().to_vec(),
    )))
}
