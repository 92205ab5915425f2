//! From addresses to frames: symbolizing a [`RawStack`] (with the
//! `backtrace` crate, as std's backtraces are) and folding fibra's own
//! frames out of it.
//!
//! A dump of thousands of fibers holds few distinct stacks and fewer
//! distinct addresses (fibers of one kind wait in the same places), so a
//! [`Resolver`] resolves each address once and builds each distinct stack
//! once; equal stacks share one [`StackTrace`].

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use crate::scheduler::stack_trace::walk::RawStack;
use crate::scheduler::stack_trace::{StackFrame, StackTrace};

/// Resolves the stacks of one dump, remembering what it resolved.
#[derive(Default)]
pub(crate) struct Resolver {
    /// The frames at an address: several when calls were inlined there,
    /// innermost first.
    frames: HashMap<usize, Arc<[StackFrame]>>,
    /// Every stack built so far, by its addresses.
    stacks: HashMap<Box<[usize]>, StackTrace>,
}

impl Resolver {
    /// The frames of `raw`, fibra's own folded away (see [`fold`]).
    pub(crate) fn resolve(&mut self, raw: &RawStack) -> StackTrace {
        if let Some(trace) = self.stacks.get(&raw.ips) {
            return trace.clone();
        }
        let mut all = Vec::with_capacity(raw.ips.len() * 2);
        for &ip in &raw.ips {
            all.extend(self.frames_at(ip).iter().cloned());
        }
        let kept = fold(&all);
        let trace = StackTrace::new(all[kept].to_vec(), raw.cut);
        self.stacks.insert(raw.ips.clone(), trace.clone());
        trace
    }

    fn frames_at(&mut self, ip: usize) -> &Arc<[StackFrame]> {
        self.frames.entry(ip).or_insert_with(|| symbolize(ip))
    }
}

/// The frames at `ip`, a return address (or a parked context's resume
/// point, which follows its switch's last instruction as a return address
/// follows its call): looked up at `ip - 1`, inside the call, as std does.
fn symbolize(ip: usize) -> Arc<[StackFrame]> {
    let mut frames = Vec::new();
    // `resolve` looks the address up as a return address (one byte back),
    // inlined frames first; `backtrace` serializes it with its own lock.
    backtrace::resolve(ip as *mut std::ffi::c_void, |symbol| {
        frames.push(StackFrame {
            function: symbol.name().map(|n| format!("{n:#}").into()),
            file: symbol.filename().map(Arc::from),
            line: symbol.lineno(),
            column: symbol.colno(),
        });
    });
    if frames.is_empty() {
        frames.push(StackFrame {
            function: None,
            file: None,
            line: None,
            column: None,
        });
    }
    frames.into()
}

/// Whose code a frame is, for folding.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Owner {
    /// fibra's: its functions, closures and assembly.
    Fibra,
    /// The plumbing fibra's frames call user code through and that a
    /// walk passes: std's, core's and alloc's, the unwinder's, the
    /// `backtrace` crate's, and frames without a name.
    Glue,
    /// The user's (or any other crate's).
    User,
}

fn owner(frame: &StackFrame) -> Owner {
    let Some(name) = frame.function() else {
        return Owner::Glue;
    };
    // Debug info of `line-tables-only` names an inlined call by its last
    // segment alone (`park_raw`, `call_once<F, A>`, `{closure#1}`), as
    // std's backtraces then print it: its file tells whose it is.
    let path = name.split('<').next().unwrap_or(name);
    if !path.contains("::")
        && !name.starts_with('<')
        && let Some(file) = frame.file()
    {
        return owner_of_file(file);
    }
    owner_of(name)
}

/// The owner of the code in `file`: fibra's sources, the standard
/// library's (`/rustc/<hash>/library/std/...`), or someone else's.
fn owner_of_file(file: &Path) -> Owner {
    let fibra = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/src"));
    if file.starts_with(fibra) {
        return Owner::Fibra;
    }
    let mut parts = file.components().map(|c| c.as_os_str());
    let std_lib = parts.any(|p| p == "library")
        && parts
            .next()
            .is_some_and(|p| p == "std" || p == "core" || p == "alloc");
    if std_lib { Owner::Glue } else { Owner::User }
}

/// The owner of a function named as `rustc-demangle` prints it (`{:#}`):
/// `a::b::c`, `<a::T>::m`, `<T as a::Trait>::m`, a closure's `{{closure}}`.
fn owner_of(name: &str) -> Owner {
    const FIBRA: &[&str] = &["fibra::", "fibra_0_1_"];
    const GLUE: &[&str] = &[
        "std::",
        "core::",
        "alloc::",
        "backtrace::",
        "__rust",
        "_Unwind_",
        "__GI_",
    ];
    let starts = |s: &str, list: &[&str]| list.iter().any(|p| s.starts_with(p));
    let of_path = |path: &str| {
        if starts(path, FIBRA) {
            Owner::Fibra
        } else if starts(path, GLUE) {
            Owner::Glue
        } else {
            Owner::User
        }
    };
    let Some(qualified) = name.strip_prefix('<') else {
        return of_path(name);
    };
    // `<Type as Trait>::method`: the type's owner, unless the type is a
    // bare generic parameter (`<F as core::ops::FnOnce<()>>::call_once`):
    // then the trait's. A reference or pointer type is its pointee's
    // (`<&mut <fibra::X>::f::{closure#2} as FnOnce<..>>::call_once`).
    match qualified.split_once(" as ") {
        Some((ty, tr)) if !ty.contains("::") && !ty.contains('<') => of_path(tr),
        Some((ty, _)) => of_path(pointee(ty)),
        None => of_path(pointee(qualified)),
    }
}

/// The type a reference, pointer or trait-object type names, as
/// `rustc-demangle` spells them (`&mut T`, `*const T`, `dyn T`, `<T>`).
fn pointee(mut ty: &str) -> &str {
    loop {
        let rest = ["&", "mut ", "*const ", "*mut ", "dyn ", "<", "("]
            .iter()
            .find_map(|p| ty.strip_prefix(p));
        match rest {
            Some(rest) => ty = rest.trim_start(),
            None => return ty,
        }
    }
}

/// The range of `frames` (innermost first) to keep: without the frames
/// fibra's own parking (or the dump's walk) adds inside the user's last
/// call into fibra, and without the ones of the fiber's start outside the
/// user's closure.
///
/// - Inside: the innermost run of fibra and glue frames goes, up to its
///   outermost fibra frame, which stays: the call the user made
///   (`fibra::sync::Mutex<T>::lock`, `fibra::runtime::...::dump`), as Go
///   shows `sync.(*Mutex).Lock` and folds `runtime.gopark` away.
/// - Outside: the outermost fibra frame and everything outside it go (a
///   spawned fiber's trampoline and entry; for the root, `block_on` and its
///   callers, which are the thread's, not the root's), with the fibra and
///   glue frames just inside it (`catch_unwind`, `FnOnce::call_once`).
///
/// Frames between the two stay, fibra's included (`fibra::scope`, a
/// `OnceLock`'s initialization): they are how the user's code got there.
fn fold(frames: &[StackFrame]) -> std::ops::Range<usize> {
    let owners: Vec<Owner> = frames.iter().map(owner).collect();
    // Outside: from the outermost fibra frame in, through fibra and glue.
    let end = match owners.iter().rposition(|&o| o == Owner::Fibra) {
        Some(outermost) => owners[..outermost]
            .iter()
            .rposition(|&o| o == Owner::User)
            .map_or(0, |user| user + 1),
        None => owners.len(),
    };
    // Inside: up to the first user frame, keeping the last fibra frame.
    let run = owners[..end]
        .iter()
        .position(|&o| o == Owner::User)
        .unwrap_or(end);
    let start = owners[..run]
        .iter()
        .rposition(|&o| o == Owner::Fibra)
        .unwrap_or(0);
    start.min(end)..end
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(name: &str) -> StackFrame {
        StackFrame {
            function: (!name.is_empty()).then(|| name.into()),
            file: None,
            line: None,
            column: None,
        }
    }

    fn kept(names: &[&str]) -> Vec<String> {
        let frames: Vec<StackFrame> = names.iter().map(|n| frame(n)).collect();
        frames[fold(&frames)]
            .iter()
            .map(|f| f.function().unwrap_or("?").to_owned())
            .collect()
    }

    #[test]
    fn owners() {
        assert_eq!(owner_of("fibra::sync::mutex::Mutex<T>::lock"), Owner::Fibra);
        assert_eq!(
            owner_of("<fibra::net::TcpStream as std::io::Read>::read"),
            Owner::Fibra
        );
        assert_eq!(
            owner_of("<F as core::ops::function::FnOnce<()>>::call_once"),
            Owner::Glue
        );
        assert_eq!(owner_of("<app::Conn as std::io::Read>::read"), Owner::User);
        assert_eq!(
            owner_of("<alloc::boxed::Box<F,A> as core::ops::function::FnOnce<Args>>::call_once"),
            Owner::Glue
        );
        assert_eq!(owner_of("fibra_0_1_trampoline"), Owner::Fibra);
        assert_eq!(owner_of("app::main::{{closure}}"), Owner::User);
        assert_eq!(owner_of("std::panicking::try"), Owner::Glue);
        assert_eq!(owner_of("<app::Foo>::bar"), Owner::User);
        // v0 mangling, as nightly demangles it.
        assert_eq!(
            owner_of("<fibra::scheduler::core::Core>::dump_section::{closure#2}"),
            Owner::Fibra
        );
        assert_eq!(
            owner_of(
                "<&mut <fibra::scheduler::core::Core>::dump_section::{closure#2} as core::ops::function::FnOnce<((usize, u32),)>>::call_once"
            ),
            Owner::Fibra
        );
        assert_eq!(
            owner_of("<&dyn app::Handler as core::ops::Fn<()>>::call"),
            Owner::User
        );
    }

    #[test]
    fn short_names_are_told_by_their_file() {
        let at = |name: &str, file: &str| StackFrame {
            function: Some(name.into()),
            file: Some(Path::new(file).into()),
            line: Some(1),
            column: None,
        };
        let src = concat!(env!("CARGO_MANIFEST_DIR"), "/src/scheduler/park.rs");
        assert_eq!(owner(&at("park_raw", src)), Owner::Fibra);
        let core = "/rustc/0123/library/core/src/ops/function.rs";
        assert_eq!(
            owner(&at("call_once<fibra::x::{closure_env#1}, ()>", core)),
            Owner::Glue
        );
        assert_eq!(
            owner(&at("{closure#0}", "/home/me/app/src/main.rs")),
            Owner::User
        );
        // A name with its path is told by the path, wherever its file.
        assert_eq!(owner(&at("app::serve", src)), Owner::User);
    }

    #[test]
    fn a_parked_fiber_keeps_the_call_into_fibra_and_the_user_frames() {
        let names = [
            "fibra::arch::x86_64::switch",
            "fibra::scheduler::core::switch::Core::park_raw",
            "core::ops::function::FnOnce::call_once",
            "fibra::sync::mutex::Mutex<T>::lock",
            "app::wait_here",
            "std::io::Read::read_exact",
            "app::main::{{closure}}",
            "core::ops::function::FnOnce::call_once",
            "std::panicking::try",
            "fibra::fiber::entry::run",
            "",
            "fibra_0_1_trampoline",
        ];
        assert_eq!(
            kept(&names),
            [
                "fibra::sync::mutex::Mutex<T>::lock",
                "app::wait_here",
                "std::io::Read::read_exact",
                "app::main::{{closure}}"
            ]
        );
    }

    #[test]
    fn the_root_ends_at_its_closure_and_the_asker_at_its_call() {
        let names = [
            "backtrace::backtrace::trace_unsynchronized",
            "fibra::scheduler::stack_trace::walk::current",
            "fibra::runtime::current_thread::Runtime::dump",
            "app::report",
            "app::main::{{closure}}",
            "std::panic::catch_unwind",
            "fibra::runtime::current_thread::Runtime::block_on",
            "app::main",
            "std::rt::lang_start",
            "__libc_start_main",
            "_start",
        ];
        assert_eq!(
            kept(&names),
            [
                "fibra::runtime::current_thread::Runtime::dump",
                "app::report",
                "app::main::{{closure}}"
            ]
        );
    }

    #[test]
    fn stacks_of_fibra_alone_keep_nothing() {
        assert!(
            kept(&[
                "fibra::x",
                "core::y",
                "fibra::entry",
                "fibra_0_1_trampoline"
            ])
            .is_empty()
        );
        assert!(kept(&[]).is_empty());
        // No fibra frame: nothing is folded.
        assert_eq!(kept(&["app::a", "app::b"]), ["app::a", "app::b"]);
    }
}
