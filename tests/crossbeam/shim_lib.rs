//! A crate named `crossbeam-channel` whose whole API is fibra's: crossbeam's
//! own tests, compiled against it unmodified, run against `fibra::channel`.
//! Written into the suite's scratch folder by `run.sh`; not part of fibra.

pub use fibra::channel::*;
pub use fibra::{select, select_biased};

/// crossbeam's `#[doc(hidden)]` macro behind `select!`, which its mpsc test
/// file calls with `select!`'s public grammar.
#[macro_export]
macro_rules! crossbeam_channel_internal {
    ($($t:tt)*) => { ::fibra::select! { $($t)* } };
}
