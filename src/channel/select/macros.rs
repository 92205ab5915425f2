//! `select!` and `select_biased!`: crossbeam's syntax, written out as a
//! [`Select`](super::Select) — each arm's sender or receiver added, one
//! operation chosen, its body run with the operation's result. A send's
//! message is made only once its arm is chosen.

/// Waits on several channel operations and runs the arm of the one that
/// completes: crossbeam-channel's `select!`, fiber-aware.
///
/// Arms: `recv(r) -> msg => body`, `send(s, value) -> res => body`, and at
/// most one of `default => body` (nothing ready now) or
/// `default(timeout) => body` (nothing ready within `timeout`). `msg` is a
/// `Result<T, RecvError>` (an error when the channel is empty and
/// disconnected), `res` a `Result<(), SendError<T>>`.
///
/// Beyond crossbeam, three arms wait on what fibra knows besides channels:
/// `join(handle) -> res => body`, when the fiber of a
/// [`JoinHandle`](crate::JoinHandle) has finished (`res` is its result,
/// taken out of the handle, which must not be joined again);
/// `group(g) -> res => body`, when a member of the
/// [`Group`](crate::Group) `g` has finished (`res` is its result, as
/// [`Group::join_next`](crate::Group::join_next) gives it; an empty group
/// is never ready: loop while `!g.is_empty()` to collect every member); and
/// `io(fd, interest) -> ready => body`, when a socket or any pollable fd is
/// ready for [`Interest`](crate::io::Interest) (`ready` an
/// `io::Result<Interest>`, as [`fibra::io::wait`](crate::io::wait) gives).
/// So "a line from the client, a broadcast, or quit" is one `select!` in
/// one fiber (see `examples/chat.rs`). Every arm borrows what it is
/// given, a value or a reference alike (`recv(r)` and `recv(&r)`,
/// `io(s, ..)` and `io(&s, ..)`, `join(h)`): the receiver, socket or
/// handle stays usable after the select. With several arms
/// ready, one is chosen at random; [`select_biased!`](crate::select_biased)
/// takes the first. In a fiber the wait parks the fiber.
///
/// An arm given something it cannot wait on is a compile error that says
/// what the arm takes and what it got, and marks that arm's `recv`,
/// `send`, `join`, `group` or `io` ("`recv(..)` in `select!` takes a
/// channel receiver, not `u32`"):
///
/// ```compile_fail,E0277
/// let (_s, r) = fibra::channel::unbounded::<u8>();
/// let not_a_receiver = 5u32;
/// fibra::select! {
///     recv(r) -> _ => {},
///     recv(not_a_receiver) -> _ => {}, // error[E0277], marked at `recv`
/// }
/// ```
///
/// ```
/// use std::time::Duration;
/// use fibra::channel::{after, bounded, unbounded};
///
/// fibra::run(|| {
///     let (lines_s, lines) = unbounded();
///     let (quit_s, quit) = bounded::<()>(1);
///     fibra::spawn(move || {
///         lines_s.send("hello").unwrap();
///         fibra::sleep(Duration::from_millis(5));
///         quit_s.send(()).unwrap();
///     });
///     let mut seen = Vec::new();
///     loop {
///         fibra::select! {
///             recv(lines) -> line => seen.push(line.unwrap()),
///             recv(quit) -> _ => break,
///             recv(after(Duration::from_secs(10))) -> _ => panic!("stuck"),
///         }
///     }
///     assert_eq!(seen, ["hello"]);
/// });
/// ```
///
/// A supervisor that collects its workers' results as they finish while
/// it also serves requests:
///
/// ```
/// use std::time::Duration;
/// use fibra::channel::{after, unbounded};
///
/// fibra::run(|| {
///     let workers = fibra::Group::new();
///     for ms in [10, 20] {
///         workers.spawn(move || {
///             fibra::sleep(Duration::from_millis(ms));
///             ms
///         });
///     }
///     let (requests_s, requests) = unbounded::<&str>();
///     requests_s.send("status").unwrap();
///     let (mut served, mut results) = (0, Vec::new());
///     while !workers.is_empty() {
///         fibra::select! {
///             recv(requests) -> _ => served += 1,
///             group(workers) -> ended => results.push(ended.unwrap()),
///             recv(after(Duration::from_secs(10))) -> _ => panic!("stuck"),
///         }
///     }
///     assert_eq!((served, results), (1, vec![10, 20]));
/// });
/// ```
#[macro_export]
macro_rules! select {
    ($($arms:tt)*) => {
        $crate::__select_parse!(new () $($arms)*)
    };
}

/// [`select!`](crate::select), choosing the first ready arm (in the order
/// written) instead of one at random.
///
/// ```
/// let (s, r) = fibra::channel::unbounded();
/// s.send(1).unwrap();
/// let (s2, r2) = fibra::channel::unbounded();
/// s2.send(2).unwrap();
/// let first = fibra::select_biased! {
///     recv(r) -> m => m.unwrap(),
///     recv(r2) -> m => m.unwrap(),
/// };
/// assert_eq!(first, 1);
/// ```
#[macro_export]
macro_rules! select_biased {
    ($($arms:tt)*) => {
        $crate::__select_parse!(new_biased () $($arms)*)
    };
}

/// Parses the arms of `select!` into `[kind (args) (pat) (body)]` items.
#[doc(hidden)]
#[macro_export]
macro_rules! __select_parse {
    ($ctor:ident ($($done:tt)*)) => {
        $crate::__select_register!($ctor __sel () () $($done)*)
    };
    ($ctor:ident ($($done:tt)*) default => $b:block, $($rest:tt)*) => {
        $crate::__select_parse!($ctor ($($done)* [default () () ($b)]) $($rest)*)
    };
    ($ctor:ident ($($done:tt)*) default => $b:block $($rest:tt)*) => {
        $crate::__select_parse!($ctor ($($done)* [default () () ($b)]) $($rest)*)
    };
    ($ctor:ident ($($done:tt)*) default => $b:expr, $($rest:tt)*) => {
        $crate::__select_parse!($ctor ($($done)* [default () () ($b)]) $($rest)*)
    };
    ($ctor:ident ($($done:tt)*) default => $b:expr) => {
        $crate::__select_parse!($ctor ($($done)* [default () () ($b)]))
    };
    ($ctor:ident ($($done:tt)*) default() => $b:block, $($rest:tt)*) => {
        $crate::__select_parse!($ctor ($($done)* [default () () ($b)]) $($rest)*)
    };
    ($ctor:ident ($($done:tt)*) default() => $b:block $($rest:tt)*) => {
        $crate::__select_parse!($ctor ($($done)* [default () () ($b)]) $($rest)*)
    };
    ($ctor:ident ($($done:tt)*) default() => $b:expr, $($rest:tt)*) => {
        $crate::__select_parse!($ctor ($($done)* [default () () ($b)]) $($rest)*)
    };
    ($ctor:ident ($($done:tt)*) default() => $b:expr) => {
        $crate::__select_parse!($ctor ($($done)* [default () () ($b)]))
    };
    ($ctor:ident ($($done:tt)*) default($t:expr $(,)?) => $b:block, $($rest:tt)*) => {
        $crate::__select_parse!($ctor ($($done)* [default ($t) () ($b)]) $($rest)*)
    };
    ($ctor:ident ($($done:tt)*) default($t:expr $(,)?) => $b:block $($rest:tt)*) => {
        $crate::__select_parse!($ctor ($($done)* [default ($t) () ($b)]) $($rest)*)
    };
    ($ctor:ident ($($done:tt)*) default($t:expr $(,)?) => $b:expr, $($rest:tt)*) => {
        $crate::__select_parse!($ctor ($($done)* [default ($t) () ($b)]) $($rest)*)
    };
    ($ctor:ident ($($done:tt)*) default($t:expr $(,)?) => $b:expr) => {
        $crate::__select_parse!($ctor ($($done)* [default ($t) () ($b)]))
    };
    // An operation: `recv(..)`, `send(..)`, `join(..)`, `group(..)` or
    // `io(..)`, its arguments checked when it is added. Its name goes on
    // twice: to be matched there, and as the user wrote it (with its
    // span), to name the check (see `arm.rs`).
    ($ctor:ident ($($done:tt)*) $kind:ident ($($args:tt)*) -> $p:pat => $b:block, $($rest:tt)*) => {
        $crate::__select_parse!($ctor ($($done)* [$kind $kind ($($args)*) ($p) ($b)]) $($rest)*)
    };
    ($ctor:ident ($($done:tt)*) $kind:ident ($($args:tt)*) -> $p:pat => $b:block $($rest:tt)*) => {
        $crate::__select_parse!($ctor ($($done)* [$kind $kind ($($args)*) ($p) ($b)]) $($rest)*)
    };
    ($ctor:ident ($($done:tt)*) $kind:ident ($($args:tt)*) -> $p:pat => $b:expr, $($rest:tt)*) => {
        $crate::__select_parse!($ctor ($($done)* [$kind $kind ($($args)*) ($p) ($b)]) $($rest)*)
    };
    ($ctor:ident ($($done:tt)*) $kind:ident ($($args:tt)*) -> $p:pat => $b:expr) => {
        $crate::__select_parse!($ctor ($($done)* [$kind $kind ($($args)*) ($p) ($b)]))
    };
    ($ctor:ident ($($done:tt)*) $($bad:tt)+) => {
        ::core::compile_error!(
            "expected `recv(r) -> msg => body`, `send(s, v) -> res => body`, `join(h) -> res => body`, `group(g) -> res => body`, `io(fd, interest) -> res => body`, `default => body` or `default(timeout) => body`"
        )
    };
}

/// Adds each arm's operation to the `Select` named `$sel`, keeping the
/// handle and index idents (fresh per expansion) for the dispatch.
#[doc(hidden)]
#[macro_export]
macro_rules! __select_register {
    // All added: choose, then dispatch.
    ($ctor:ident $sel:ident ($($reg:tt)*) ($($def:tt)*)) => {
        $crate::__select_choose!($sel ($($def)*) $($reg)*)
    };
    // Each argument is bound by reference (`ref`: a value is borrowed, not
    // moved, even by a closure the select is in), by a `match`, so that
    // temporaries in its expression (`r.unwrap_or(&never())`) live as long
    // as the select. `Arm(..).$op()` then checks it and gives the handle:
    // `$op` is the arm's own `recv`/`send`/.. token, so a wrong argument's
    // error marks that arm (see `arm.rs`).
    ($ctor:ident $sel:ident ($($reg:tt)*) ($($def:tt)*) [recv $op:ident ($r:expr $(,)?) ($p:pat) ($b:expr)] $($rest:tt)*) => {
        match $r {
            ref __handle => {
                let __handle = $crate::channel::Arm(__handle).$op();
                $crate::__select_register!(@with $ctor $sel ($($reg)*) ($($def)*) recv (__handle) [__handle ($p) ($b)] $($rest)*)
            }
        }
    };
    ($ctor:ident $sel:ident ($($reg:tt)*) ($($def:tt)*) [send $op:ident ($s:expr, $v:expr $(,)?) ($p:pat) ($b:expr)] $($rest:tt)*) => {
        match $s {
            ref __handle => {
                let __handle = $crate::channel::Arm(__handle).$op();
                $crate::__select_register!(@with $ctor $sel ($($reg)*) ($($def)*) send (__handle) [__handle ($v) ($p) ($b)] $($rest)*)
            }
        }
    };
    ($ctor:ident $sel:ident ($($reg:tt)*) ($($def:tt)*) [join $op:ident ($h:expr $(,)?) ($p:pat) ($b:expr)] $($rest:tt)*) => {
        match $h {
            ref __handle => {
                let __handle = $crate::channel::Arm(__handle).$op();
                $crate::__select_register!(@with $ctor $sel ($($reg)*) ($($def)*) join (__handle) [__handle ($p) ($b)] $($rest)*)
            }
        }
    };
    ($ctor:ident $sel:ident ($($reg:tt)*) ($($def:tt)*) [group $op:ident ($g:expr $(,)?) ($p:pat) ($b:expr)] $($rest:tt)*) => {
        match $g {
            ref __handle => {
                let __handle = $crate::channel::Arm(__handle).$op();
                $crate::__select_register!(@with $ctor $sel ($($reg)*) ($($def)*) group (__handle) [__handle ($p) ($b)] $($rest)*)
            }
        }
    };
    ($ctor:ident $sel:ident ($($reg:tt)*) ($($def:tt)*) [io $op:ident ($fd:expr, $i:expr $(,)?) ($p:pat) ($b:expr)] $($rest:tt)*) => {{
        let __handle: ::std::os::fd::RawFd = match $fd {
            ref __fd => $crate::channel::Arm(__fd).$op(),
        };
        let __interest: $crate::io::Interest = $i;
        $crate::__select_register!(@with $ctor $sel ($($reg)*) ($($def)*) io (&__handle, __interest) [__handle ($p) ($b)] $($rest)*)
    }};
    ($ctor:ident $sel:ident ($($reg:tt)*) () [default ($($t:expr)?) () ($b:expr)] $($rest:tt)*) => {
        $crate::__select_register!($ctor $sel ($($reg)*) ([($($t)?) ($b)]) $($rest)*)
    };
    ($ctor:ident $sel:ident ($($reg:tt)*) ($($def:tt)+) [default $($x:tt)*] $($rest:tt)*) => {
        ::core::compile_error!("there can be only one `default` arm")
    };
    ($ctor:ident $sel:ident ($($reg:tt)*) ($($def:tt)*) [$kind:ident $($x:tt)*] $($rest:tt)*) => {
        ::core::compile_error!(::core::concat!(
            "unknown operation `", ::core::stringify!($kind),
            "`: expected `recv(r)`, `send(s, v)`, `join(h)`, `group(g)` or `io(fd, interest)`"
        ))
    };
    // The handle is bound; the Select is made before the first operation.
    (@with $ctor:ident $sel:ident () ($($def:tt)*) $kind:ident ($($args:tt)*) [$($arm:tt)*] $($rest:tt)*) => {{
        #[allow(unused_mut)]
        let mut $sel = $crate::channel::Select::$ctor();
        let __index = $sel.$kind($($args)*);
        $crate::__select_register!($ctor $sel ([__index $kind $($arm)*]) ($($def)*) $($rest)*)
    }};
    (@with $ctor:ident $sel:ident ($($reg:tt)+) ($($def:tt)*) $kind:ident ($($args:tt)*) [$($arm:tt)*] $($rest:tt)*) => {{
        let __index = $sel.$kind($($args)*);
        $crate::__select_register!($ctor $sel ($($reg)* [__index $kind $($arm)*]) ($($def)*) $($rest)*)
    }};
}

/// Chooses an operation (waiting, trying, or waiting at most the default's
/// timeout) and runs its arm.
#[doc(hidden)]
#[macro_export]
macro_rules! __select_choose {
    // No operation at all.
    ($sel:ident ()) => {{
        let mut $sel = $crate::channel::Select::new();
        let __op = $sel.select();
        ::core::unreachable!("an empty select never returns: {:?}", __op)
    }};
    ($sel:ident ([() ($b:expr)])) => {{
        $b
    }};
    ($sel:ident ([($t:expr) ($b:expr)])) => {{
        $crate::channel::after($t).recv().ok();
        $b
    }};
    ($sel:ident () $($reg:tt)+) => {{
        let __op = $sel.select();
        $crate::__select_dispatch!(__op $($reg)+)
    }};
    ($sel:ident ([() ($b:expr)]) $($reg:tt)+) => {{
        match $sel.try_select() {
            ::core::result::Result::Ok(__op) => $crate::__select_dispatch!(__op $($reg)+),
            ::core::result::Result::Err(_) => $b,
        }
    }};
    ($sel:ident ([($t:expr) ($b:expr)]) $($reg:tt)+) => {{
        match $sel.select_timeout($t) {
            ::core::result::Result::Ok(__op) => $crate::__select_dispatch!(__op $($reg)+),
            ::core::result::Result::Err(_) => $b,
        }
    }};
}

/// Runs the arm of the chosen operation `$op`.
#[doc(hidden)]
#[macro_export]
macro_rules! __select_dispatch {
    ($op:ident) => {
        ::core::unreachable!("a select chose an operation it does not have")
    };
    ($op:ident [$i:ident recv $h:ident ($p:pat) ($b:expr)] $($rest:tt)*) => {
        if $op.index() == $i {
            let $p = $op.recv($h);
            $b
        } else {
            $crate::__select_dispatch!($op $($rest)*)
        }
    };
    ($op:ident [$i:ident send $h:ident ($v:expr) ($p:pat) ($b:expr)] $($rest:tt)*) => {
        if $op.index() == $i {
            let $p = $op.send($h, $v);
            $b
        } else {
            $crate::__select_dispatch!($op $($rest)*)
        }
    };
    ($op:ident [$i:ident join $h:ident ($p:pat) ($b:expr)] $($rest:tt)*) => {
        if $op.index() == $i {
            let $p = $op.join($h);
            $b
        } else {
            $crate::__select_dispatch!($op $($rest)*)
        }
    };
    ($op:ident [$i:ident group $h:ident ($p:pat) ($b:expr)] $($rest:tt)*) => {
        if $op.index() == $i {
            let $p = $op.group($h);
            $b
        } else {
            $crate::__select_dispatch!($op $($rest)*)
        }
    };
    ($op:ident [$i:ident io $h:ident ($p:pat) ($b:expr)] $($rest:tt)*) => {
        if $op.index() == $i {
            let _ = $h;
            let $p = $op.io();
            $b
        } else {
            $crate::__select_dispatch!($op $($rest)*)
        }
    };
}
