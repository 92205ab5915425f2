//! Name resolution: `getaddrinfo`, `getnameinfo`, `gethostbyname` and
//! `gethostbyname_r` run on the blocking pool while the fiber parks.
//!
//! glibc's resolver makes its socket calls inside libc, through internal
//! names the hooks cannot interpose, so a lookup in a fiber used to block
//! the thread for as long as the DNS server took (`ToSocketAddrs` behind
//! `std::net::TcpStream::connect("db:5432")`, ureq with a host name,
//! libpq). These hooks hand the whole call to glibc's own function on a
//! pool thread instead: every answer, error and side effect is glibc's
//! (`/etc/hosts`, `nsswitch.conf`, `resolv.conf`, its cache), and `errno`
//! and `h_errno` are carried back to the calling thread.
//!
//! The wait cannot be cut short: a cancellation or an expired
//! `fibra::timeout` takes effect at the fiber's next park after the lookup,
//! which `resolv.conf`'s `timeout` and `attempts` bound. Outside fibers,
//! and in a signal handler, the call is glibc's, on the calling thread.

use std::cell::RefCell;
use std::ffi::CStr;
use std::sync::atomic::{AtomicUsize, Ordering};

use libc::{addrinfo, c_char, c_int, hostent, size_t, sockaddr, socklen_t};

use super::sys;
use crate::blocking;

unsafe extern "C" {
    /// This thread's `h_errno` (glibc exports it under this name).
    fn __h_errno_location() -> *mut c_int;
}

/// glibc's definition of `name`, found once (`dlsym(RTLD_NEXT)`: the next
/// definition after the executable's, which is this module's).
fn real(cache: &AtomicUsize, name: &CStr) -> Option<usize> {
    let f = cache.load(Ordering::Relaxed);
    if f != 0 {
        return Some(f);
    }
    // SAFETY: a NUL-terminated symbol name; RTLD_NEXT is valid from code
    // in the executable.
    let f = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) } as usize;
    cache.store(f, Ordering::Relaxed);
    (f != 0).then_some(f)
}

/// Runs `f` on the blocking pool (from a fiber that may park; else right
/// here) with this thread's `errno` and `h_errno` (a glibc function that
/// does not set them leaves the caller's), carrying them back after.
fn on_pool<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    if super::parkable().is_none() {
        return f();
    }
    // SAFETY: this thread's errno and h_errno, always valid.
    let before = unsafe { (*libc::__errno_location(), *__h_errno_location()) };
    let (r, errno, h_errno) = blocking::run_borrowing(|| {
        // SAFETY: the pool thread's errno and h_errno, always valid.
        unsafe {
            *libc::__errno_location() = before.0;
            *__h_errno_location() = before.1;
        }
        let r = f();
        // SAFETY: this thread's errno and h_errno, always valid.
        unsafe { (r, *libc::__errno_location(), *__h_errno_location()) }
    });
    sys::set_errno(errno);
    // SAFETY: this thread's h_errno, always valid.
    unsafe { *__h_errno_location() = h_errno };
    r
}

type GetAddrInfo = unsafe extern "C" fn(
    *const c_char,
    *const c_char,
    *const addrinfo,
    *mut *mut addrinfo,
) -> c_int;

/// getaddrinfo(3).
///
/// # Safety
///
/// As getaddrinfo(3).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn getaddrinfo(
    node: *const c_char,
    service: *const c_char,
    hints: *const addrinfo,
    res: *mut *mut addrinfo,
) -> c_int {
    static REAL: AtomicUsize = AtomicUsize::new(0);
    let Some(f) = real(&REAL, c"getaddrinfo") else {
        return libc::EAI_SYSTEM;
    };
    // SAFETY: glibc's getaddrinfo has this signature.
    let f = unsafe { std::mem::transmute::<usize, GetAddrInfo>(f) };
    let (node, service, hints, res) = (
        node as usize,
        service as usize,
        hints as usize,
        res as usize,
    );
    on_pool(move || {
        // SAFETY: the caller's pointers, valid until this hook returns,
        // which is after the call (`on_pool` waits for it).
        unsafe { f(node as _, service as _, hints as _, res as _) }
    })
}

type GetNameInfo = unsafe extern "C" fn(
    *const sockaddr,
    socklen_t,
    *mut c_char,
    socklen_t,
    *mut c_char,
    socklen_t,
    c_int,
) -> c_int;

/// getnameinfo(3).
///
/// # Safety
///
/// As getnameinfo(3).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn getnameinfo(
    sa: *const sockaddr,
    salen: socklen_t,
    host: *mut c_char,
    hostlen: socklen_t,
    serv: *mut c_char,
    servlen: socklen_t,
    flags: c_int,
) -> c_int {
    static REAL: AtomicUsize = AtomicUsize::new(0);
    let Some(f) = real(&REAL, c"getnameinfo") else {
        return libc::EAI_SYSTEM;
    };
    // SAFETY: glibc's getnameinfo has this signature.
    let f = unsafe { std::mem::transmute::<usize, GetNameInfo>(f) };
    let (sa, host, serv) = (sa as usize, host as usize, serv as usize);
    on_pool(move || {
        // SAFETY: the caller's pointers, valid until this hook returns,
        // which is after the call.
        unsafe {
            f(
                sa as _, salen, host as _, hostlen, serv as _, servlen, flags,
            )
        }
    })
}

type GetHostByName = unsafe extern "C" fn(*const c_char) -> *mut hostent;

/// One fiber's `gethostbyname` answer, which the pointer it returned
/// points into until the fiber's next call (or its end). glibc keeps one
/// per process, under a lock, for threads that cannot interleave between
/// the call and the reading of its answer; fibers of one thread do
/// interleave there (each parks during its lookup), so each has its own.
struct HostAnswer {
    ent: hostent,
    buf: Vec<u8>,
}

crate::fiber_local! {
    static HOST_ANSWER: RefCell<Option<Box<HostAnswer>>> = RefCell::new(None);
}

/// What glibc's `gethostbyname` starts its buffer at, and grows it by.
const HOST_BUF_STEP: usize = 1024;
/// Where the growing stops (glibc's stops only when memory runs out).
const HOST_BUF_MAX: usize = 16 << 20;

/// gethostbyname(3). In a fiber, its answer is the fiber's own (see
/// [`HostAnswer`]); elsewhere it is glibc's, in glibc's static storage.
///
/// # Safety
///
/// As gethostbyname(3).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gethostbyname(name: *const c_char) -> *mut hostent {
    if super::parkable().is_none() {
        static REAL: AtomicUsize = AtomicUsize::new(0);
        let Some(f) = real(&REAL, c"gethostbyname") else {
            return std::ptr::null_mut();
        };
        // SAFETY: glibc's gethostbyname has this signature.
        let f = unsafe { std::mem::transmute::<usize, GetHostByName>(f) };
        // SAFETY: the caller's contract.
        return unsafe { f(name) };
    }
    // glibc's answers a numeric address itself, leaving errno as it was;
    // its `_r` form, called below, sets errno for those too.
    // SAFETY: this thread's errno, always valid.
    let errno = unsafe { *libc::__errno_location() };
    // SAFETY: the caller's name: null, or NUL-terminated.
    let numeric = unsafe { name.as_ref() }.is_some_and(|_| {
        // SAFETY: as above, not null.
        digits_dots(unsafe { CStr::from_ptr(name) }.to_bytes())
    });
    let answer = HOST_ANSWER.with(|answer| {
        // A fiber's own value: no other context borrows it (a signal
        // handler's call is not parkable, above).
        let mut answer = answer.borrow_mut();
        let answer = answer.get_or_insert_with(|| {
            Box::new(HostAnswer {
                // SAFETY: all-zero is a valid hostent (null pointers).
                ent: unsafe { std::mem::zeroed() },
                buf: vec![0; HOST_BUF_STEP],
            })
        });
        let mut result: *mut hostent = std::ptr::null_mut();
        let mut herr: c_int = 0;
        loop {
            let (ent, buf, len) = (
                &raw mut answer.ent,
                answer.buf.as_mut_ptr(),
                answer.buf.len(),
            );
            // SAFETY: our hostent and buffer of `len` bytes, the fiber's
            // result and h_errno words: all valid for the call, which
            // `gethostbyname_r` makes before it returns.
            let r = unsafe { gethostbyname_r(name, ent, buf.cast(), len, &mut result, &mut herr) };
            // As glibc's: a bigger buffer while the answer did not fit.
            if r == libc::ERANGE && herr == -1 && len < HOST_BUF_MAX {
                answer.buf.resize(len + HOST_BUF_STEP, 0);
                continue;
            }
            break;
        }
        if herr != 0 {
            // SAFETY: this thread's h_errno, always valid.
            unsafe { *__h_errno_location() = herr };
        }
        result
    });
    if numeric {
        sys::set_errno(errno);
    }
    answer
}

/// Whether glibc's `gethostbyname` takes `name` for an address and answers
/// it without a lookup: digits and dots, not ending in a dot (IPv4); or a
/// colon first, or a hex digit first and a colon somewhere, with only hex
/// digits, colons and dots (IPv6).
fn digits_dots(name: &[u8]) -> bool {
    let Some(&first) = name.first() else {
        return false;
    };
    let v4 = first.is_ascii_digit()
        && name.last() != Some(&b'.')
        && name.iter().all(|c| c.is_ascii_digit() || *c == b'.');
    let v6 = (first == b':' || (first.is_ascii_hexdigit() && name.contains(&b':')))
        && name
            .iter()
            .all(|c| c.is_ascii_hexdigit() || *c == b':' || *c == b'.');
    v4 || v6
}

type GetHostByNameR = unsafe extern "C" fn(
    *const c_char,
    *mut hostent,
    *mut c_char,
    size_t,
    *mut *mut hostent,
    *mut c_int,
) -> c_int;

/// gethostbyname_r(3).
///
/// # Safety
///
/// As gethostbyname_r(3).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gethostbyname_r(
    name: *const c_char,
    ret: *mut hostent,
    buf: *mut c_char,
    buflen: size_t,
    result: *mut *mut hostent,
    h_errnop: *mut c_int,
) -> c_int {
    static REAL: AtomicUsize = AtomicUsize::new(0);
    let Some(f) = real(&REAL, c"gethostbyname_r") else {
        return libc::ENOSYS;
    };
    // SAFETY: glibc's gethostbyname_r has this signature.
    let f = unsafe { std::mem::transmute::<usize, GetHostByNameR>(f) };
    let p = [
        name as usize,
        ret as usize,
        buf as usize,
        result as usize,
        h_errnop as usize,
    ];
    on_pool(move || {
        // SAFETY: the caller's pointers, valid until this hook returns,
        // which is after the call.
        unsafe {
            f(
                p[0] as _, p[1] as _, p[2] as _, buflen, p[3] as _, p[4] as _,
            )
        }
    })
}
