//! The demo generator's one error type.

#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// A cluster spec the generator cannot lay out, naming the flag at fault.
    #[error("{flag}: {reason}")]
    Spec { flag: &'static str, reason: String },
}
