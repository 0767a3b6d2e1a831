//! The PEM files the service is given (`--pg-tls-cert`, `--worker-ca`, `worker --tls-cert`, …),
//! read and checked at start: an error names the flag and the file.

use std::path::Path;

use datafusion_postgres::pgwire::tokio::tokio_rustls::rustls::pki_types::pem::PemObject;
use datafusion_postgres::pgwire::tokio::tokio_rustls::rustls::pki_types::{
    CertificateDer, PrivateKeyDer,
};

/// A PEM file's bytes and what they hold.
pub struct Pem<T> {
    pub bytes: Vec<u8>,
    pub parsed: T,
}

fn read(path: &Path, flag: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|error| format!("{flag} {}: {error}", path.display()))
}

/// The certificates of `path` (a chain, or a CA's): at least one.
pub fn certificates(path: &Path, flag: &str) -> Result<Pem<Vec<CertificateDer<'static>>>, String> {
    let bytes = read(path, flag)?;
    let parsed = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| format!("{flag} {}: {error}", path.display()))?;
    if parsed.is_empty() {
        return Err(format!("{flag} {}: no certificate in it", path.display()));
    }
    Ok(Pem { bytes, parsed })
}

/// The private key of `path`.
pub fn private_key(path: &Path, flag: &str) -> Result<Pem<PrivateKeyDer<'static>>, String> {
    let bytes = read(path, flag)?;
    let parsed = PrivateKeyDer::from_pem_slice(&bytes)
        .map_err(|error| format!("{flag} {}: no private key in it ({error})", path.display()))?;
    Ok(Pem { bytes, parsed })
}
