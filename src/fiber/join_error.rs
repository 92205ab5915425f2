//! Why a join found no result: the fiber panicked or was cancelled.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use crate::scheduler::fiber_id::FiberId;

/// Why a fiber gave no result: it panicked, or it was cancelled.
pub struct JoinError {
    id: FiberId,
    /// Boxed: a join packet holds a `Result<T, JoinError>`, and must stay
    /// within a cached block (see the test below); an error may allocate.
    detail: Box<(Option<Arc<str>>, Repr)>,
}

enum Repr {
    Cancelled,
    Panic(Box<dyn Any + Send + 'static>),
}

impl JoinError {
    pub(crate) fn cancelled(id: FiberId, name: Option<Arc<str>>) -> JoinError {
        JoinError {
            id,
            detail: Box::new((name, Repr::Cancelled)),
        }
    }

    pub(crate) fn panic(
        id: FiberId,
        name: Option<Arc<str>>,
        payload: Box<dyn Any + Send + 'static>,
    ) -> JoinError {
        JoinError {
            id,
            detail: Box::new((name, Repr::Panic(payload))),
        }
    }

    /// The name of the fiber that failed, if it had one.
    ///
    /// ```
    /// fibra::run(|| {
    ///     let h = fibra::Builder::new().name("w".into()).spawn(|| panic!()).unwrap();
    ///     assert_eq!(h.join().unwrap_err().name(), Some("w"));
    /// });
    /// ```
    pub fn name(&self) -> Option<&str> {
        self.detail.0.as_deref()
    }

    /// Whether the fiber was cancelled (by [`JoinHandle::cancel`](crate::JoinHandle::cancel) or by
    /// dropping its runtime).
    ///
    /// ```
    /// fibra::run(|| {
    ///     let h = fibra::spawn(|| ());
    ///     h.cancel(); // before it ever ran
    ///     assert!(h.join().unwrap_err().is_cancelled());
    /// });
    /// ```
    pub fn is_cancelled(&self) -> bool {
        matches!(self.detail.1, Repr::Cancelled)
    }

    /// Whether the fiber panicked.
    ///
    /// ```
    /// fibra::run(|| {
    ///     let err = fibra::spawn(|| panic!("no")).join().unwrap_err();
    ///     assert!(err.is_panic());
    /// });
    /// ```
    pub fn is_panic(&self) -> bool {
        matches!(self.detail.1, Repr::Panic(_))
    }

    /// The panic's payload, to re-raise it with
    /// [`std::panic::resume_unwind`] or inspect it.
    ///
    /// # Panics
    ///
    /// When the fiber was cancelled rather than panicking; see
    /// [`try_into_panic`](Self::try_into_panic).
    ///
    /// ```
    /// fibra::run(|| {
    ///     let err = fibra::spawn(|| panic!("boom")).join().unwrap_err();
    ///     assert_eq!(*err.into_panic().downcast::<&str>().unwrap(), "boom");
    /// });
    /// ```
    #[track_caller]
    pub fn into_panic(self) -> Box<dyn Any + Send + 'static> {
        self.try_into_panic()
            .expect("`JoinError::into_panic` on a fiber that was cancelled, not panicked")
    }

    /// The panic's payload, or the error back if the fiber was cancelled.
    ///
    /// ```
    /// fibra::run(|| {
    ///     let h = fibra::spawn(|| ());
    ///     h.cancel();
    ///     assert!(h.join().unwrap_err().try_into_panic().is_err());
    /// });
    /// ```
    pub fn try_into_panic(self) -> Result<Box<dyn Any + Send + 'static>, JoinError> {
        match self.detail.1 {
            Repr::Panic(_) => match self.detail.1 {
                Repr::Panic(payload) => Ok(payload),
                Repr::Cancelled => unreachable!("matched just above"),
            },
            Repr::Cancelled => Err(self),
        }
    }

    /// The id of the fiber that failed.
    ///
    /// ```
    /// fibra::run(|| {
    ///     let h = fibra::spawn(|| panic!());
    ///     let id = h.fiber().id();
    ///     assert_eq!(h.join().unwrap_err().id(), id);
    /// });
    /// ```
    pub fn id(&self) -> FiberId {
        self.id
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> Option<&str> {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
}

/// `fiber 'worker-3' (#12) panicked: boom`; `fiber #12 panicked: boom`
/// when the fiber has no name; `... was cancelled` likewise.
///
/// ```
/// fibra::run(|| {
///     let h = fibra::Builder::new().name("worker-3".into()).spawn(|| panic!("boom")).unwrap();
///     let id = h.fiber().id();
///     assert_eq!(h.join().unwrap_err().to_string(), format!("fiber 'worker-3' (#{id}) panicked: boom"));
/// });
/// ```
impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.detail.0 {
            Some(name) => write!(f, "fiber '{name}' (#{})", self.id)?,
            None => write!(f, "fiber #{}", self.id)?,
        }
        match &self.detail.1 {
            Repr::Cancelled => f.write_str(" was cancelled"),
            Repr::Panic(p) => match panic_message(p.as_ref()) {
                Some(msg) => write!(f, " panicked: {msg}"),
                None => f.write_str(" panicked"),
            },
        }
    }
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.detail.1 {
            Repr::Cancelled => write!(f, "JoinError::Cancelled({})", self.id),
            Repr::Panic(p) => write!(
                f,
                "JoinError::Panic({}, {:?})",
                self.id,
                panic_message(p.as_ref()).unwrap_or("...")
            ),
        }
    }
}

impl std::error::Error for JoinError {}

impl From<JoinError> for std::io::Error {
    fn from(e: JoinError) -> std::io::Error {
        std::io::Error::other(e.to_string())
    }
}
