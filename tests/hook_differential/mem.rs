//! Memory for the calls' pointer arguments: buffers followed by canary
//! bytes, buffers at the very end of a page whose next page is
//! inaccessible (a read or write past them faults), inaccessible ones, and
//! the timeouts and signal masks of the p-calls.

use std::mem;
use std::ptr;

use libc::{c_void, sigset_t, timespec};

use crate::harness::Record;

/// What an output buffer holds before the call.
pub(crate) const FILL: u8 = 0xEE;
/// What the bytes after (or before) an output hold.
pub(crate) const CANARY: u8 = 0xA5;
pub(crate) const CANARY_LEN: usize = 16;

pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf reads no memory of ours.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

/// Memory for a call to read or write: `len` bytes followed by canary
/// bytes (on the heap), or at the very end of a page whose next page is
/// inaccessible (preceded by canary bytes), or an inaccessible page.
pub(crate) struct Buf {
    ptr: *mut u8,
    pub(crate) len: usize,
    /// The canary bytes are after the data (heap) or before it (page end).
    after: bool,
    heap: Option<Box<[u8]>>,
    map: Option<(*mut c_void, usize)>,
}

impl Buf {
    fn filled(len: usize, fill: u8) -> Buf {
        let mut v = vec![fill; len + CANARY_LEN];
        v[len..].fill(CANARY);
        let mut heap = v.into_boxed_slice();
        Buf {
            ptr: heap.as_mut_ptr(),
            len,
            after: true,
            heap: Some(heap),
            map: None,
        }
    }

    /// `len` bytes of [`FILL`], then canary bytes.
    pub(crate) fn new(len: usize) -> Buf {
        Buf::filled(len, FILL)
    }

    pub(crate) fn zeroed(len: usize) -> Buf {
        Buf::filled(len, 0)
    }

    /// `data`, then canary bytes.
    pub(crate) fn from(data: &[u8]) -> Buf {
        let b = Buf::new(data.len());
        b.data_mut().copy_from_slice(data);
        b
    }

    pub(crate) fn of<T: Copy>(v: &T) -> Buf {
        // SAFETY: `v` is a valid T, read as its bytes (plain C data).
        let bytes =
            unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), size_of::<T>()) };
        Buf::from(bytes)
    }

    /// `len` zero bytes at the very end of a page; the next page is
    /// inaccessible.
    pub(crate) fn at_page_end(len: usize) -> Buf {
        let page = page_size();
        assert!(len + CANARY_LEN <= page);
        // SAFETY: an anonymous private mapping touches nothing of ours.
        let base = unsafe {
            libc::mmap(
                ptr::null_mut(),
                2 * page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED);
        // SAFETY: the second page of our mapping.
        let r =
            unsafe { libc::mprotect(base.cast::<u8>().add(page).cast(), page, libc::PROT_NONE) };
        assert_eq!(r, 0);
        // SAFETY: `len <= page`: inside the first page.
        let ptr = unsafe { base.cast::<u8>().add(page - len) };
        // SAFETY: the first page is ours and writable.
        unsafe {
            ptr::write_bytes(ptr.sub(CANARY_LEN), CANARY, CANARY_LEN);
            ptr::write_bytes(ptr, 0, len);
        }
        Buf {
            ptr,
            len,
            after: false,
            heap: None,
            map: Some((base, 2 * page)),
        }
    }

    /// A pointer to an inaccessible page (of length 0 to us).
    pub(crate) fn inaccessible() -> Buf {
        let page = page_size();
        // SAFETY: an anonymous mapping touches nothing of ours.
        let base = unsafe {
            libc::mmap(
                ptr::null_mut(),
                page,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED);
        Buf {
            ptr: base.cast(),
            len: 0,
            after: true,
            heap: None,
            map: Some((base, page)),
        }
    }

    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    pub(crate) fn cast<T>(&self) -> *mut T {
        self.ptr.cast()
    }

    pub(crate) fn data(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: our `len` bytes.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    #[allow(clippy::mut_from_ref)]
    pub(crate) fn data_mut(&self) -> &mut [u8] {
        if self.len == 0 {
            return &mut [];
        }
        // SAFETY: our `len` bytes; callers hold no other view of them.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    /// The data and its canary bytes.
    pub(crate) fn bytes(&self) -> Vec<u8> {
        if self.heap.is_none() && self.after {
            return Vec::new(); // inaccessible
        }
        // SAFETY: the data and the canary bytes next to it are ours.
        unsafe {
            if self.after {
                std::slice::from_raw_parts(self.ptr, self.len + CANARY_LEN).to_vec()
            } else {
                std::slice::from_raw_parts(self.ptr.sub(CANARY_LEN), self.len + CANARY_LEN).to_vec()
            }
        }
    }

    /// The canary bytes alone.
    pub(crate) fn canary(&self) -> Vec<u8> {
        let b = self.bytes();
        if self.after {
            b[self.len..].to_vec()
        } else {
            b[..CANARY_LEN].to_vec()
        }
    }

    pub(crate) fn get<T: Copy>(&self, off: usize) -> T {
        assert!(off + size_of::<T>() <= self.len);
        // SAFETY: inside our bytes; unaligned read of plain C data.
        unsafe { ptr::read_unaligned(self.ptr.add(off).cast::<T>()) }
    }

    pub(crate) fn put<T: Copy>(&self, off: usize, v: T) {
        assert!(off + size_of::<T>() <= self.len);
        // SAFETY: inside our bytes; unaligned write of plain C data.
        unsafe { ptr::write_unaligned(self.ptr.add(off).cast::<T>(), v) }
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        if let Some((base, len)) = self.map {
            // SAFETY: our mapping, no longer used.
            unsafe { libc::munmap(base, len) };
        }
    }
}

/// Where an array a call reads and writes is (pollfds, epoll events).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum ArrMem {
    Heap,
    PageEnd,
    Null,
    Bad,
}

/// A timespec input: a valid one is compared within the tolerance (ppoll
/// must leave it alone: exactly what it was, but the kernel's is a copy).
pub(crate) type Ts = Option<(i64, i64)>;

pub(crate) fn ts_buf(ts: Ts) -> Option<Buf> {
    ts.map(|(s, ns)| {
        Buf::of(&timespec {
            tv_sec: s,
            tv_nsec: ns,
        })
    })
}

/// A signal mask for the p-calls: empty, or SIGWINCH blocked.
pub(crate) fn mask_buf(mask: bool) -> Option<Buf> {
    mask.then(|| {
        // SAFETY: all-zero is a valid sigset_t, which these fill.
        let mut set: sigset_t = unsafe { mem::zeroed() };
        // SAFETY: a valid sigset_t.
        unsafe {
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGWINCH);
        }
        Buf::of(&set)
    })
}

/// `b`'s address as a pointer argument, or null.
pub(crate) fn mut_ptr<T>(b: &Option<Buf>) -> *mut T {
    b.as_ref().map_or(ptr::null_mut(), |b| b.cast())
}

/// `b`'s address as a const pointer argument, or null.
pub(crate) fn const_ptr<T>(b: &Option<Buf>) -> *const T {
    mut_ptr::<T>(b).cast_const()
}

/// A p-call's timeout and signal mask as the call left them (inputs: they
/// must come back as they were).
pub(crate) fn inputs_after_call(mut rec: Record, ts: &Option<Buf>, mask: &Option<Buf>) -> Record {
    if let Some(b) = ts {
        rec = rec.out("timeout_after_call", b.bytes());
    }
    if let Some(b) = mask {
        rec = rec.out("mask_after_call", b.bytes());
    }
    rec
}
