//! Opens the object store that `--data` names: a local directory (the default), `file://…`, or
//! `s3://bucket/prefix`, `gs://…`, `az://…` with credentials from the usual environment variables.

use std::sync::Arc;

use object_store::ObjectStore;
use object_store::aws::AmazonS3Builder;
use object_store::azure::MicrosoftAzureBuilder;
use object_store::gcp::GoogleCloudStorageBuilder;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::prefix::PrefixStore;
use url::Url;

use crate::error::{LakeError, Result};

/// Where the lake lives.
#[derive(Debug, Clone)]
pub enum DataLocation {
    /// A directory on this machine; the default catalog lives inside it.
    Local(std::path::PathBuf),
    /// An object-store URL.
    Remote(Url),
}

impl DataLocation {
    pub fn parse(location: &str) -> Result<Self> {
        let invalid = |reason: String| LakeError::Location {
            location: location.into(),
            reason,
        };
        if !location.contains("://") {
            return Ok(Self::Local(location.into()));
        }
        let url = Url::parse(location).map_err(|e| invalid(e.to_string()))?;
        match url.scheme() {
            "file" => url
                .to_file_path()
                .map(Self::Local)
                .map_err(|_| invalid("not a local path".into())),
            "s3" | "s3a" | "gs" | "az" | "abfs" | "abfss" => Ok(Self::Remote(url)),
            other => Err(invalid(format!(
                "unsupported scheme '{other}' (use a path, file://, s3://, gs:// or az://)"
            ))),
        }
    }

    pub fn open(&self) -> Result<Arc<dyn ObjectStore>> {
        match self {
            Self::Local(dir) => {
                std::fs::create_dir_all(dir).map_err(|e| LakeError::Location {
                    location: dir.display().to_string(),
                    reason: e.to_string(),
                })?;
                Ok(Arc::new(LocalFileSystem::new_with_prefix(dir)?))
            }
            Self::Remote(url) => {
                let store: Arc<dyn ObjectStore> = match url.scheme() {
                    "s3" | "s3a" => {
                        Arc::new(AmazonS3Builder::from_env().with_url(url.as_str()).build()?)
                    }
                    "gs" => Arc::new(
                        GoogleCloudStorageBuilder::from_env()
                            .with_url(url.as_str())
                            .build()?,
                    ),
                    _ => Arc::new(
                        MicrosoftAzureBuilder::from_env()
                            .with_url(url.as_str())
                            .build()?,
                    ),
                };
                let prefix = url.path().trim_matches('/');
                Ok(if prefix.is_empty() {
                    store
                } else {
                    Arc::new(PrefixStore::new(store, Path::from(prefix)))
                })
            }
        }
    }

    /// The catalog used when `--catalog` is not given: a SQLite file inside a local lake, or in
    /// the working directory beside a remote one.
    pub fn default_catalog_url(&self) -> String {
        match self {
            Self::Local(dir) => format!("sqlite://{}?mode=rwc", dir.join("catalog.db").display()),
            Self::Remote(_) => "sqlite://gpuledger-catalog.db?mode=rwc".to_string(),
        }
    }
}

impl std::fmt::Display for DataLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Local(dir) => write!(f, "{}", dir.display()),
            Self::Remote(url) => write!(f, "{url}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_parse() {
        assert!(matches!(
            DataLocation::parse("./gpuledger-data").unwrap(),
            DataLocation::Local(_)
        ));
        assert!(
            matches!(DataLocation::parse("file:///tmp/lake").unwrap(), DataLocation::Local(p) if p.ends_with("lake"))
        );
        assert!(matches!(
            DataLocation::parse("s3://bucket/prefix").unwrap(),
            DataLocation::Remote(_)
        ));
        let err = DataLocation::parse("ftp://host/x").unwrap_err().to_string();
        assert!(err.contains("unsupported scheme 'ftp'"), "{err}");
    }

    #[test]
    fn default_catalog_sits_in_a_local_lake() {
        let loc = DataLocation::parse("/var/lib/gpuledger").unwrap();
        assert_eq!(
            loc.default_catalog_url(),
            "sqlite:///var/lib/gpuledger/catalog.db?mode=rwc"
        );
    }
}
