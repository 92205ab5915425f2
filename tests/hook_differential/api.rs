//! The functions under test, as a place calls them: glibc's own (found
//! with `dlsym(RTLD_NEXT)`), or the hooks (the symbols the linker binds
//! `libc::read` and the others to, which the executable defines).

use std::ffi::c_char;
use std::mem;

use libc::{
    addrinfo, c_int, c_void, clockid_t, epoll_event, fd_set, hostent, iovec, msghdr, nfds_t,
    pollfd, sighandler_t, sigset_t, size_t, sockaddr, socklen_t, ssize_t, timespec, timeval,
};

use crate::harness::{Place, STACK};

type ReadFn = unsafe extern "C" fn(c_int, *mut c_void, size_t) -> ssize_t;
type WriteFn = unsafe extern "C" fn(c_int, *const c_void, size_t) -> ssize_t;
type IovFn = unsafe extern "C" fn(c_int, *const iovec, c_int) -> ssize_t;
type RecvFn = unsafe extern "C" fn(c_int, *mut c_void, size_t, c_int) -> ssize_t;
type RecvfromFn = unsafe extern "C" fn(
    c_int,
    *mut c_void,
    size_t,
    c_int,
    *mut sockaddr,
    *mut socklen_t,
) -> ssize_t;
type RecvmsgFn = unsafe extern "C" fn(c_int, *mut msghdr, c_int) -> ssize_t;
type SendFn = unsafe extern "C" fn(c_int, *const c_void, size_t, c_int) -> ssize_t;
type SendtoFn = unsafe extern "C" fn(
    c_int,
    *const c_void,
    size_t,
    c_int,
    *const sockaddr,
    socklen_t,
) -> ssize_t;
type SendmsgFn = unsafe extern "C" fn(c_int, *const msghdr, c_int) -> ssize_t;
type AcceptFn = unsafe extern "C" fn(c_int, *mut sockaddr, *mut socklen_t) -> c_int;
type Accept4Fn = unsafe extern "C" fn(c_int, *mut sockaddr, *mut socklen_t, c_int) -> c_int;
type ConnectFn = unsafe extern "C" fn(c_int, *const sockaddr, socklen_t) -> c_int;
type PollFn = unsafe extern "C" fn(*mut pollfd, nfds_t, c_int) -> c_int;
type PpollFn = unsafe extern "C" fn(*mut pollfd, nfds_t, *const timespec, *const sigset_t) -> c_int;
type SelectFn =
    unsafe extern "C" fn(c_int, *mut fd_set, *mut fd_set, *mut fd_set, *mut timeval) -> c_int;
type PselectFn = unsafe extern "C" fn(
    c_int,
    *mut fd_set,
    *mut fd_set,
    *mut fd_set,
    *const timespec,
    *const sigset_t,
) -> c_int;
type EpollWaitFn = unsafe extern "C" fn(c_int, *mut epoll_event, c_int, c_int) -> c_int;
type EpollPwaitFn =
    unsafe extern "C" fn(c_int, *mut epoll_event, c_int, c_int, *const sigset_t) -> c_int;
type EpollPwait2Fn =
    unsafe extern "C" fn(c_int, *mut epoll_event, c_int, *const timespec, *const sigset_t) -> c_int;
type NanosleepFn = unsafe extern "C" fn(*const timespec, *mut timespec) -> c_int;
type ClockNanosleepFn =
    unsafe extern "C" fn(clockid_t, c_int, *const timespec, *mut timespec) -> c_int;
type GetaddrinfoFn = unsafe extern "C" fn(
    *const c_char,
    *const c_char,
    *const addrinfo,
    *mut *mut addrinfo,
) -> c_int;
type GetnameinfoFn = unsafe extern "C" fn(
    *const sockaddr,
    socklen_t,
    *mut c_char,
    socklen_t,
    *mut c_char,
    socklen_t,
    c_int,
) -> c_int;
type GethostbynameFn = unsafe extern "C" fn(*const c_char) -> *mut hostent;
type GethostbynameRFn = unsafe extern "C" fn(
    *const c_char,
    *mut hostent,
    *mut c_char,
    size_t,
    *mut *mut hostent,
    *mut c_int,
) -> c_int;
type CloseFn = unsafe extern "C" fn(c_int) -> c_int;
type Dup2Fn = unsafe extern "C" fn(c_int, c_int) -> c_int;
type Dup3Fn = unsafe extern "C" fn(c_int, c_int, c_int) -> c_int;
type SigactionFn =
    unsafe extern "C" fn(c_int, *const libc::sigaction, *mut libc::sigaction) -> c_int;
type SignalFn = unsafe extern "C" fn(c_int, sighandler_t) -> sighandler_t;
type SiginterruptFn = unsafe extern "C" fn(c_int, c_int) -> c_int;

// What the `libc` crate does not declare for glibc. These names bind to the
// hooks too (the executable defines them).
unsafe extern "C" {
    fn gethostbyname(name: *const c_char) -> *mut hostent;
    fn gethostbyname_r(
        name: *const c_char,
        ret: *mut hostent,
        buf: *mut c_char,
        buflen: size_t,
        result: *mut *mut hostent,
        h_errnop: *mut c_int,
    ) -> c_int;
    fn siginterrupt(sig: c_int, flag: c_int) -> c_int;
}

/// The functions under test, as one place calls them: glibc's, or the
/// hooks.
#[derive(Clone, Copy)]
pub(crate) struct Api {
    pub(crate) place: Place,
    pub(crate) read: ReadFn,
    pub(crate) write: WriteFn,
    pub(crate) readv: IovFn,
    pub(crate) writev: IovFn,
    pub(crate) recv: RecvFn,
    pub(crate) recvfrom: RecvfromFn,
    pub(crate) recvmsg: RecvmsgFn,
    pub(crate) send: SendFn,
    pub(crate) sendto: SendtoFn,
    pub(crate) sendmsg: SendmsgFn,
    pub(crate) accept: AcceptFn,
    pub(crate) accept4: Accept4Fn,
    pub(crate) connect: ConnectFn,
    pub(crate) poll: PollFn,
    pub(crate) ppoll: PpollFn,
    pub(crate) select: SelectFn,
    pub(crate) pselect: PselectFn,
    pub(crate) epoll_wait: EpollWaitFn,
    pub(crate) epoll_pwait: EpollPwaitFn,
    pub(crate) epoll_pwait2: EpollPwait2Fn,
    pub(crate) nanosleep: NanosleepFn,
    pub(crate) clock_nanosleep: ClockNanosleepFn,
    pub(crate) getaddrinfo: GetaddrinfoFn,
    pub(crate) getnameinfo: GetnameinfoFn,
    pub(crate) gethostbyname: GethostbynameFn,
    pub(crate) gethostbyname_r: GethostbynameRFn,
    pub(crate) close: CloseFn,
    pub(crate) dup2: Dup2Fn,
    pub(crate) dup3: Dup3Fn,
    pub(crate) sigaction: SigactionFn,
    pub(crate) signal: SignalFn,
    pub(crate) siginterrupt: SiginterruptFn,
}

/// glibc's definition of `name`, as a `T`.
macro_rules! next {
    ($name:literal, $t:ty) => {{
        // SAFETY: a NUL-terminated name; RTLD_NEXT, from the executable's
        // code, looks in the objects loaded after it: glibc.
        let p = unsafe { libc::dlsym(libc::RTLD_NEXT, $name.as_ptr()) };
        assert!(!p.is_null(), "dlsym(RTLD_NEXT, {:?}) found nothing", $name);
        // SAFETY: glibc's function of that name has the C signature `$t`
        // (as the man page declares it).
        unsafe { mem::transmute::<*mut c_void, $t>(p) }
    }};
}

impl Api {
    pub(crate) fn of(place: Place) -> Api {
        match place {
            Place::Glibc => Api::glibc(),
            Place::Fiber | Place::Thread => Api {
                place,
                ..Api::hook()
            },
        }
    }

    fn glibc() -> Api {
        Api {
            place: Place::Glibc,
            read: next!(c"read", ReadFn),
            write: next!(c"write", WriteFn),
            readv: next!(c"readv", IovFn),
            writev: next!(c"writev", IovFn),
            recv: next!(c"recv", RecvFn),
            recvfrom: next!(c"recvfrom", RecvfromFn),
            recvmsg: next!(c"recvmsg", RecvmsgFn),
            send: next!(c"send", SendFn),
            sendto: next!(c"sendto", SendtoFn),
            sendmsg: next!(c"sendmsg", SendmsgFn),
            accept: next!(c"accept", AcceptFn),
            accept4: next!(c"accept4", Accept4Fn),
            connect: next!(c"connect", ConnectFn),
            poll: next!(c"poll", PollFn),
            ppoll: next!(c"ppoll", PpollFn),
            select: next!(c"select", SelectFn),
            pselect: next!(c"pselect", PselectFn),
            epoll_wait: next!(c"epoll_wait", EpollWaitFn),
            epoll_pwait: next!(c"epoll_pwait", EpollPwaitFn),
            epoll_pwait2: next!(c"epoll_pwait2", EpollPwait2Fn),
            nanosleep: next!(c"nanosleep", NanosleepFn),
            clock_nanosleep: next!(c"clock_nanosleep", ClockNanosleepFn),
            getaddrinfo: next!(c"getaddrinfo", GetaddrinfoFn),
            getnameinfo: next!(c"getnameinfo", GetnameinfoFn),
            gethostbyname: next!(c"gethostbyname", GethostbynameFn),
            gethostbyname_r: next!(c"gethostbyname_r", GethostbynameRFn),
            close: next!(c"close", CloseFn),
            dup2: next!(c"dup2", Dup2Fn),
            dup3: next!(c"dup3", Dup3Fn),
            sigaction: next!(c"sigaction", SigactionFn),
            signal: next!(c"signal", SignalFn),
            siginterrupt: next!(c"siginterrupt", SiginterruptFn),
        }
    }

    fn hook() -> Api {
        Api {
            place: Place::Thread,
            read: libc::read,
            write: libc::write,
            readv: libc::readv,
            writev: libc::writev,
            recv: libc::recv,
            recvfrom: libc::recvfrom,
            recvmsg: libc::recvmsg,
            send: libc::send,
            sendto: libc::sendto,
            sendmsg: libc::sendmsg,
            accept: libc::accept,
            accept4: libc::accept4,
            connect: libc::connect,
            poll: libc::poll,
            ppoll: libc::ppoll,
            select: libc::select,
            pselect: libc::pselect,
            epoll_wait: libc::epoll_wait,
            epoll_pwait: libc::epoll_pwait,
            epoll_pwait2: libc::epoll_pwait2,
            nanosleep: libc::nanosleep,
            clock_nanosleep: libc::clock_nanosleep,
            getaddrinfo: libc::getaddrinfo,
            getnameinfo: libc::getnameinfo,
            gethostbyname,
            gethostbyname_r,
            close: libc::close,
            dup2: libc::dup2,
            dup3: libc::dup3,
            sigaction: libc::sigaction,
            signal: libc::signal,
            siginterrupt,
        }
    }

    /// Runs `bodies` as this place runs concurrent work: in a fiber, each
    /// in a fiber of its own, all at once; elsewhere one after another.
    pub(crate) fn concurrently(&self, bodies: Vec<Box<dyn FnOnce() + 'static>>) {
        if self.place == Place::Fiber {
            let handles: Vec<_> = bodies
                .into_iter()
                .map(|b| {
                    fibra::Builder::new()
                        .stack_size(STACK)
                        .spawn(b)
                        .expect("spawn")
                })
                .collect();
            for h in handles {
                h.join().expect("a concurrent body failed");
            }
        } else {
            for b in bodies {
                b();
            }
        }
    }
}
