//! Go's errgroup on a [`Group`]: [`Group::try_join_all`], for members
//! that return a `Result` (the first `Err` cancels the rest).

use std::panic;

use super::Group;
use crate::fiber::JoinError;
use crate::scheduler::context;
use crate::scheduler::park;

impl<T, E> Group<Result<T, E>> {
    /// Waits for every member, as Go's `errgroup.Wait` does, and returns
    /// their values in the order they were spawned.
    ///
    /// The first member to finish with an `Err` cancels the others; once
    /// they have unwound, its error is returned. A member's panic cancels
    /// the others the same way and then resumes in the caller.
    ///
    /// # Panics
    ///
    /// As said, with a member's panic. And when a member was cancelled
    /// before any error (the group was [cancelled](Group::cancel), or its
    /// deadline passed), as there is no `E` to return for it: unless the
    /// caller itself is cancelled or its `fibra::timeout` expired, when it
    /// unwinds for that instead. For a deadline you get as a value, call
    /// this inside [`fibra::timeout`](crate::timeout): at its deadline the
    /// group is dropped, so cancelled, and the timeout returns
    /// [`Elapsed`](crate::Elapsed).
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// fibra::run(|| {
    ///     let group = fibra::Group::new();
    ///     for i in 0..3 {
    ///         group.spawn(move || Ok::<_, String>(i * 10));
    ///     }
    ///     assert_eq!(group.try_join_all(), Ok(vec![0, 10, 20]));
    ///
    ///     let group = fibra::Group::new();
    ///     group.spawn(|| {
    ///         fibra::sleep(Duration::from_secs(3600)); // cancelled by the error
    ///         Ok(())
    ///     });
    ///     group.spawn(|| Err("no route"));
    ///     assert_eq!(group.try_join_all(), Err("no route"));
    /// });
    /// ```
    #[track_caller]
    pub fn try_join_all(self) -> Result<Vec<T>, E> {
        let mut values = Vec::with_capacity(self.len());
        while let Some((n, result)) = self.next(true) {
            match result {
                Ok(Ok(value)) => values.push((n, value)),
                Ok(Err(e)) => {
                    drop(self); // cancels the others and waits for them
                    return Err(e);
                }
                Err(e) if e.is_panic() => {
                    drop(self);
                    panic::resume_unwind(e.into_panic());
                }
                Err(e) => {
                    drop(self);
                    cancelled_member(e);
                }
            }
        }
        values.sort_unstable_by_key(|(n, _)| *n);
        Ok(values.into_iter().map(|(_, value)| value).collect())
    }
}

/// [`Group::try_join_all`] found a member cancelled before any error.
#[cold]
#[track_caller]
fn cancelled_member(e: JoinError) -> ! {
    if let Some(core) = context::current() {
        park::check_unwind(core); // the caller's own cancel or timeout
    }
    panic!(
        "Group::try_join_all: {e}, before any member failed: the group was cancelled or \
         its deadline passed, and there is no `E` to return for that (call try_join_all \
         inside `fibra::timeout` to get an `Elapsed` at a deadline)"
    )
}
