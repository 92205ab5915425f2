//! Every live runtime's scheduler, where a debugger finds them: the way in
//! for gdb's `info fibers` and `fiber N bt` (`src/observe/debugger/gdb_fibers.py`,
//! embedded in every binary that links fibra by [`GDB_SCRIPT`]; see the
//! "In gdb" section of [`fibra::runtime`](crate::runtime)).
//!
//! A debugger that stops a process sees memory, not thread-locals it can
//! trust or a registry behind a lock it may not take: it needs one global,
//! found by its symbol, that leads to each runtime's fiber records. That is
//! [`FIBRA_0_1_RUNTIMES`]: the address and length of an array that gives,
//! for every live runtime, the address of its [`Core`], of the part of it
//! that holds the records ([`Local`]), and the kernel's id of its thread
//! (the LWP gdb lists, in a core file too, where threads have no names),
//! kept in step with a `Vec` under a lock by [`register`] (when a runtime
//! is made, on its thread) and [`unregister`] (when it is closed). Nothing
//! else touches it: a spawn, a park and a switch cost what they did.
//!
//! It also says where the fields the script reads lie ([`Layout`]: offsets
//! by `offset_of!`, and the bytes of each state), so the script reads raw
//! memory by the symbol's name alone. It needs the symbol table, not
//! fibra's types in the debug info: `info fibers` works at every
//! `debug` level, `false` included, as long as the binary keeps its
//! symbols.
//!
//! Rust code never reads the addresses back (they are numbers here), so a
//! `Core` that went away without [`unregister`] (a worker thread that
//! panicked out of its loop) leaves a stale entry a debugger may misread,
//! and nothing worse.

use std::mem::offset_of;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::reactor::token::Key;
use crate::scheduler::core::record::{Record, State};
use crate::scheduler::core::records::Records;
use crate::scheduler::core::{Core, FiberId, Local};
use crate::scheduler::wait_on::StoredWait;

/// What the debugger reads: `cores` points at `len` [`Entry`]s, one per
/// live runtime. Both are rewritten, under [`LIVE`]'s lock, after each
/// change of [`LIVE`]; a debugger that stops the process in the middle of
/// one may see the old array or the new one, and the script checks what
/// it reads. `layout` is set before the first entry and never changes.
///
/// The symbol's name carries the crate's version (as the assembly's do),
/// so that two versions of fibra linked into one program do not clash.
#[repr(C)]
pub(crate) struct Runtimes {
    cores: AtomicPtr<Entry>,
    len: AtomicUsize,
    layout: AtomicPtr<Layout>,
}

/// One runtime, as the debugger reads it ([`Layout::entry_size`] bytes).
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq)]
struct Entry {
    /// The address of its `Core` (what [`unregister`] finds it by).
    core: usize,
    /// Its thread's id in the kernel (`gettid`).
    tid: usize,
    /// The address of its `Local`, in the `Core`: where the records' array
    /// and the running context are (see [`Layout`]).
    local: usize,
    /// The address and length of its thread's name (UTF-8, in its
    /// `Shared`, which the `Core` keeps and which never changes it).
    thread_name: usize,
    thread_name_len: usize,
    /// 1 for a worker of a runtime of several, whose root runs the
    /// worker's loop, never the user's code.
    worker: usize,
}

/// Where the fields `gdb_fibers.py` reads lie, in bytes, and what their
/// values mean: one `u64` each, in this order (the script's
/// `LAYOUT_FIELDS` names them; keep the two in step, and only add fields
/// at the end). The script reads the layout of the very binary it runs
/// in, so nothing here is a promise across versions.
#[repr(C)]
pub(crate) struct Layout {
    /// This struct's size: a script that reads more fields than there are
    /// says so instead of reading past it.
    pub(crate) size: u64,
    pub(crate) entry_size: u64,
    /// In a `Local`: the running context's key (a `u32`), whether the
    /// runtime is entered (a `bool`), and the records' start and count.
    pub(crate) current: u64,
    pub(crate) entered: u64,
    pub(crate) records: u64,
    pub(crate) records_len: u64,
    /// A record's size (the stride of the array), and in it: the saved
    /// stack pointer, the state (a byte: see `ready` ...), the id (a
    /// `u64`), the name (an `Option<Arc<str>>`: see `name_ptr` ...), what
    /// its last park waits on (the tag byte and the word of a
    /// `StoredWait`) and its deadline (`u64` ns of `CLOCK_MONOTONIC`,
    /// `u64::MAX` for none).
    pub(crate) record_size: u64,
    pub(crate) sp: u64,
    pub(crate) state: u64,
    pub(crate) id: u64,
    pub(crate) name: u64,
    pub(crate) wait_tag: u64,
    pub(crate) wait_word: u64,
    pub(crate) waiting_until: u64,
    /// The byte of each `State`.
    pub(crate) ready: u64,
    pub(crate) running: u64,
    pub(crate) parked: u64,
    pub(crate) done: u64,
    pub(crate) vacant: u64,
    /// In an `Option<Arc<str>>` (`None`: a null pointer), the words of the
    /// pointer and of the length, and how far past where the pointer
    /// points the text starts (the `Arc`'s counts come first).
    pub(crate) name_ptr: u64,
    pub(crate) name_len: u64,
    pub(crate) name_text: u64,
    /// In a `&str` (what `StoredWait`'s word points at for a
    /// `WaitOn::Sync`), the words of the pointer and of the length.
    pub(crate) str_ptr: u64,
    pub(crate) str_len: u64,
}

// What the script reads with a given width.
const _: () = assert!(size_of::<Key>() == 4);
const _: () = assert!(size_of::<State>() == 1 && size_of::<bool>() == 1);
const _: () = assert!(size_of::<FiberId>() == 8 && size_of::<*mut u8>() == 8);
const _: () = assert!(size_of::<Option<Arc<str>>>() == 16 && size_of::<&str>() == 16);

impl Layout {
    fn new() -> Layout {
        let (name_ptr, name_len, name_text) = arc_str_layout();
        let (str_ptr, str_len) = str_layout();
        Layout {
            size: size_of::<Layout>() as u64,
            entry_size: size_of::<Entry>() as u64,
            current: offset_of!(Local, current) as u64,
            entered: offset_of!(Local, entered) as u64,
            records: (offset_of!(Local, fibers) + Records::START_AT) as u64,
            records_len: (offset_of!(Local, fibers) + Records::LEN_AT) as u64,
            record_size: size_of::<Record>() as u64,
            sp: Record::SP_AT as u64,
            state: offset_of!(Record, state) as u64,
            id: offset_of!(Record, id) as u64,
            name: offset_of!(Record, name) as u64,
            wait_tag: (Record::WAITING_ON_AT + StoredWait::TAG_AT) as u64,
            wait_word: (Record::WAITING_ON_AT + StoredWait::WORD_AT) as u64,
            waiting_until: Record::WAITING_UNTIL_AT as u64,
            ready: State::Ready as u64,
            running: State::Running as u64,
            parked: State::Parked as u64,
            done: State::Done as u64,
            vacant: State::Vacant as u64,
            name_ptr,
            name_len,
            name_text,
            str_ptr,
            str_len,
        }
    }
}

/// The two words of `fat` (a pointer and its length, in an order the
/// language leaves open) as addresses.
fn words<T>(fat: &T) -> [usize; 2] {
    assert_eq!(size_of::<T>(), 16);
    // `T` is 16 bytes (checked) of two words with no padding (a wide
    // pointer, or an `Option` of one whose `None` is a null pointer), and
    // `fat` is aligned for them. Read as pointers, so nothing turns a
    // pointer into an integer by the back door: `addr` does that below.
    // SAFETY: as just argued.
    let [a, b] = unsafe { std::ptr::from_ref(fat).cast::<[*const u8; 2]>().read() };
    [a.addr(), b.addr()]
}

/// The offsets of the pointer and of the length in an `Option<Arc<str>>`,
/// and of the text from where that pointer points.
fn arc_str_layout() -> (u64, u64, u64) {
    let text: Arc<str> = Arc::from("fibra");
    let at = Arc::as_ptr(&text).cast::<u8>().addr();
    let [a, b] = words(&Some(text.clone()));
    if b == text.len() {
        (0, 8, (at - a) as u64)
    } else {
        (8, 0, (at - b) as u64)
    }
}

/// The offsets of the pointer and of the length in a `&str`.
fn str_layout() -> (u64, u64) {
    let text: &str = "fibra";
    if words(&text)[1] == text.len() {
        (0, 8)
    } else {
        (8, 0)
    }
}

/// The debugger's way in (see [`Runtimes`]).
#[unsafe(no_mangle)]
#[used]
pub(crate) static FIBRA_0_1_RUNTIMES: Runtimes = Runtimes {
    cores: AtomicPtr::new(std::ptr::null_mut()),
    len: AtomicUsize::new(0),
    layout: AtomicPtr::new(std::ptr::null_mut()),
};

/// `src/observe/debugger/gdb_fibers.py`, in gdb's `.debug_gdb_scripts` section: gdb
/// runs it when it loads a program that links fibra (once auto-loading is
/// allowed for the program's path).
///
/// The section is written here rather than by `#![debugger_visualizer]`,
/// which rustc emits only when the binary is built with debug info: this
/// one is in every binary, at every `debug` level, and survives `strip`
/// (it is allocated, as rustc's is, so `strip = "debuginfo"` keeps it).
/// An entry is a byte 4 (Python source, inline), a name ending in a
/// newline, the source, and a NUL. It sits beside [`FIBRA_0_1_RUNTIMES`],
/// whose object file every program with a runtime links.
///
/// Not under AddressSanitizer (`--cfg fibra_asan`): ASan pads every global
/// with a red zone, which made the section an "Invalid entry" to gdb; an
/// ASan build has debug info, and `lib.rs` hands gdb the script through
/// rustc's `#![debugger_visualizer]` then, which ASan leaves alone.
#[cfg(not(fibra_asan))]
#[unsafe(link_section = ".debug_gdb_scripts")]
#[used]
static GDB_SCRIPT: [u8; SCRIPT_ENTRY_LEN] = script_entry();

#[cfg_attr(fibra_asan, allow(dead_code))]
const SCRIPT_NAME: &[u8] = b"\x04fibra_0_1_gdb_fibers.py\n";
#[cfg_attr(fibra_asan, allow(dead_code))]
const SCRIPT: &[u8] = include_bytes!("debugger/gdb_fibers.py");
#[cfg_attr(fibra_asan, allow(dead_code))]
const SCRIPT_ENTRY_LEN: usize = SCRIPT_NAME.len() + SCRIPT.len() + 1;

#[cfg_attr(fibra_asan, allow(dead_code))]
const fn script_entry() -> [u8; SCRIPT_ENTRY_LEN] {
    let mut entry = [0; SCRIPT_ENTRY_LEN];
    let mut i = 0;
    while i < SCRIPT_NAME.len() {
        entry[i] = SCRIPT_NAME[i];
        i += 1;
    }
    let mut j = 0;
    while j < SCRIPT.len() {
        // A NUL would end the entry early.
        assert!(SCRIPT[j] != 0, "gdb_fibers.py holds a NUL byte");
        entry[i + j] = SCRIPT[j];
        j += 1;
    }
    entry
}

/// The live runtimes, whose buffer [`FIBRA_0_1_RUNTIMES`] mirrors.
static LIVE: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

/// What [`Runtimes::layout`] points at.
static LAYOUT: OnceLock<Layout> = OnceLock::new();

/// The layout published for gdb, once a runtime has registered.
pub(crate) fn layout() -> Option<&'static Layout> {
    LAYOUT.get()
}

/// The addresses of the `Local`s of the runtimes registered on the thread
/// whose kernel id is `tid` (as [`Layout`] describes them).
pub(crate) fn locals_on(tid: libc::pid_t) -> Vec<usize> {
    LIVE.lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter(|e| e.tid == tid as usize)
        .map(|e| e.local)
        .collect()
}

fn update(change: impl FnOnce(&mut Vec<Entry>)) {
    let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    let layout = LAYOUT.get_or_init(Layout::new);
    FIBRA_0_1_RUNTIMES
        .layout
        .store(std::ptr::from_ref(layout).cast_mut(), Ordering::Release);
    change(&mut live);
    // Emptied first, so that a debugger never pairs the old length with a
    // smaller new array.
    FIBRA_0_1_RUNTIMES.len.store(0, Ordering::Release);
    FIBRA_0_1_RUNTIMES
        .cores
        .store(live.as_mut_ptr(), Ordering::Release);
    FIBRA_0_1_RUNTIMES.len.store(live.len(), Ordering::Release);
}

/// Lists `core`, at the address it keeps until [`unregister`] (boxed in
/// its `Runtime`, or in a worker thread's frame). Called on the thread
/// that runs it, before it runs anything.
pub(crate) fn register(core: &Core) {
    // SAFETY: `gettid` has no preconditions and cannot fail.
    let tid = unsafe { libc::gettid() };
    // SAFETY: on the runtime's thread (see above), before it runs, so no
    // other reference to its `Local` is in use; this one becomes an
    // address at once.
    let local = std::ptr::from_mut(unsafe { core.local() }).addr();
    let name = core.shared.thread_name.as_str();
    let entry = Entry {
        core: std::ptr::from_ref(core).addr(),
        tid: tid as usize,
        local,
        thread_name: name.as_ptr().addr(),
        thread_name_len: name.len(),
        worker: usize::from(core.pool().is_some()),
    };
    update(|live| live.push(entry));
}

/// Takes `core` off the list (its runtime is closing).
pub(crate) fn unregister(core: &Core) {
    let addr = std::ptr::from_ref(core).addr();
    update(|live| live.retain(|e| e.core != addr));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The probes find the words where a read of them does.
    #[test]
    fn layout_of_names() {
        let layout = Layout::new();
        let name: Option<Arc<str>> = Some(Arc::from("worker-7"));
        let at = std::ptr::from_ref(&name).cast::<u8>();
        // SAFETY: both offsets are of words inside the 16 bytes of `name`
        // (one a pointer, one a length), aligned.
        let (ptr, len) = unsafe {
            (
                at.add(layout.name_ptr as usize).cast::<*const u8>().read(),
                at.add(layout.name_len as usize).cast::<usize>().read(),
            )
        };
        // SAFETY: the text of the `Arc`, which `name` keeps alive.
        let text = unsafe { std::slice::from_raw_parts(ptr.add(layout.name_text as usize), len) };
        assert_eq!(text, b"worker-7");
        assert_eq!(layout.size as usize, size_of::<Layout>());
        assert_eq!(layout.name_ptr + layout.name_len, 8);
        assert_eq!(layout.str_ptr + layout.str_len, 8);
    }
}
