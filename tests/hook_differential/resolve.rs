//! The name lookups: `getaddrinfo`, `getnameinfo`, `gethostbyname` and
//! `gethostbyname_r`, on names from /etc/hosts, numeric and invalid names
//! (no network: the one that goes to the resolver fails at once), and
//! the error cases of their arguments.

use std::ffi::{CStr, c_char};
use std::mem;
use std::ptr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use libc::{addrinfo, c_int, c_void, hostent, sockaddr, socklen_t};

use crate::api::Api;
use crate::harness::{Case, Record, case, hex};
use crate::mem::{Buf, mut_ptr};
use crate::net::{sa, sa_len, sin, sin6_loopback, unix_addr};
use crate::sys::{H_SENTINEL, call, h_errno, set_h_errno};

pub(crate) fn c_str(p: *const c_char) -> String {
    if p.is_null() {
        return "(null)".to_string();
    }
    // SAFETY: a NUL-terminated string from glibc.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// An addrinfo list, field by field.
pub(crate) fn describe_addrinfo(mut p: *const addrinfo) -> Vec<u8> {
    let mut s = String::new();
    while !p.is_null() {
        // SAFETY: a node of glibc's list.
        let a = unsafe { &*p };
        let addr = if a.ai_addr.is_null() {
            Vec::new()
        } else {
            // SAFETY: `ai_addrlen` bytes of address.
            unsafe { std::slice::from_raw_parts(a.ai_addr.cast::<u8>(), a.ai_addrlen as usize) }
                .to_vec()
        };
        s += &format!(
            "[flags={:#x} family={} socktype={} protocol={} addrlen={} addr={} canon={}]",
            a.ai_flags,
            a.ai_family,
            a.ai_socktype,
            a.ai_protocol,
            a.ai_addrlen,
            hex(&addr),
            c_str(a.ai_canonname)
        );
        p = a.ai_next;
    }
    s.into_bytes()
}

/// A hostent, field by field (pointers into `buf`, if given, as offsets).
pub(crate) fn describe_hostent(h: *const hostent, buf: Option<&Buf>) -> Vec<u8> {
    if h.is_null() {
        return b"(null)".to_vec();
    }
    // SAFETY: a hostent from glibc.
    let h = unsafe { &*h };
    let mut s = format!(
        "name={} type={} length={}",
        c_str(h.h_name),
        h.h_addrtype,
        h.h_length
    );
    let inside = |p: *const c_void| {
        buf.is_none_or(|b| (b.ptr() as usize..b.ptr() as usize + b.len).contains(&(p as usize)))
    };
    let mut all_inside = inside(h.h_name.cast());
    let list = |mut p: *mut *mut c_char, f: &mut dyn FnMut(*mut c_char)| {
        if p.is_null() {
            return;
        }
        // SAFETY: a NULL-terminated array from glibc.
        unsafe {
            while !(*p).is_null() {
                f(*p);
                p = p.add(1);
            }
        }
    };
    list(h.h_aliases, &mut |a| {
        s += &format!(" alias={}", c_str(a));
        all_inside &= inside(a.cast());
    });
    list(h.h_addr_list, &mut |a| {
        // SAFETY: `h_length` bytes of address.
        let bytes = unsafe { std::slice::from_raw_parts(a.cast::<u8>(), h.h_length as usize) };
        s += &format!(" addr={}", hex(bytes));
        all_inside &= inside(a.cast());
    });
    if buf.is_some() {
        s += &format!(" pointers_into_buf={all_inside}");
    }
    s.into_bytes()
}

/// getaddrinfo's hints: flags, family, socktype, protocol.
pub(crate) type Hints = Option<(c_int, c_int, c_int, c_int)>;

pub(crate) fn do_getaddrinfo(
    api: &Api,
    node: Option<&'static CStr>,
    service: Option<&'static CStr>,
    hints: Hints,
) -> Record {
    // SAFETY: all-zero is a valid addrinfo.
    let mut h: addrinfo = unsafe { mem::zeroed() };
    if let Some((flags, family, socktype, protocol)) = hints {
        h.ai_flags = flags;
        h.ai_family = family;
        h.ai_socktype = socktype;
        h.ai_protocol = protocol;
    }
    let hp = if hints.is_some() {
        &raw const h
    } else {
        ptr::null()
    };
    let unset = 0x5a5a_5a5a_usize as *mut addrinfo;
    let mut res = unset;
    let np = node.map_or(ptr::null(), CStr::as_ptr);
    let sp = service.map_or(ptr::null(), CStr::as_ptr);
    // SAFETY: NUL-terminated strings (or null), valid hints (or null), a
    // result pointer of ours.
    let (r, e) = call(|| unsafe { (api.getaddrinfo)(np, sp, hp, &mut res) });
    let mut rec = Record::new(r, e);
    if r == 0 {
        rec = rec.out("result", describe_addrinfo(res));
        // SAFETY: the list getaddrinfo made.
        unsafe { libc::freeaddrinfo(res) };
    } else {
        rec = rec.flag("result_untouched", res == unset);
    }
    rec
}

pub(crate) fn getaddrinfo_cases() -> Vec<Case> {
    let stream = libc::SOCK_STREAM;
    let list: Vec<(&str, Option<&'static CStr>, Option<&'static CStr>, Hints)> = vec![
        (
            "localhost, no service, no hints",
            Some(c"localhost"),
            None,
            None,
        ),
        (
            "localhost, port 80, AF_INET stream",
            Some(c"localhost"),
            Some(c"80"),
            Some((0, libc::AF_INET, stream, 0)),
        ),
        (
            "localhost, AI_CANONNAME",
            Some(c"localhost"),
            None,
            Some((libc::AI_CANONNAME, libc::AF_UNSPEC, stream, 0)),
        ),
        (
            "localhost, service http",
            Some(c"localhost"),
            Some(c"http"),
            None,
        ),
        (
            "vm (an /etc/hosts alias), AF_INET",
            Some(c"vm"),
            None,
            Some((0, libc::AF_INET, 0, 0)),
        ),
        (
            "127.0.0.1, port 8080",
            Some(c"127.0.0.1"),
            Some(c"8080"),
            None,
        ),
        (
            "127.0.0.1, AI_NUMERICHOST",
            Some(c"127.0.0.1"),
            None,
            Some((libc::AI_NUMERICHOST, 0, 0, 0)),
        ),
        (
            "::1, AI_NUMERICHOST",
            Some(c"::1"),
            Some(c"443"),
            Some((libc::AI_NUMERICHOST, libc::AF_INET6, stream, 0)),
        ),
        (
            "127.1 (short numeric form)",
            Some(c"127.1"),
            None,
            Some((0, libc::AF_INET, stream, 0)),
        ),
        (
            "no-such-host.invalid, AI_NUMERICHOST",
            Some(c"no-such-host.invalid"),
            None,
            Some((libc::AI_NUMERICHOST, 0, 0, 0)),
        ),
        (
            "no-such-host.invalid (resolver, no network)",
            Some(c"no-such-host.invalid"),
            None,
            Some((0, libc::AF_INET, stream, 0)),
        ),
        ("no node, no service", None, None, None),
        (
            "no node, service 8080, AI_PASSIVE",
            None,
            Some(c"8080"),
            Some((libc::AI_PASSIVE, libc::AF_INET, stream, 0)),
        ),
        (
            "no node, service 8080",
            None,
            Some(c"8080"),
            Some((0, libc::AF_INET6, stream, 0)),
        ),
        (
            "localhost, service not-a-port, AI_NUMERICSERV",
            Some(c"localhost"),
            Some(c"not-a-port"),
            Some((libc::AI_NUMERICSERV, 0, 0, 0)),
        ),
        (
            "localhost, service no-such-service",
            Some(c"localhost"),
            Some(c"no-such-service"),
            None,
        ),
        (
            "localhost, bad flags",
            Some(c"localhost"),
            None,
            Some((0x7fff_0000, 0, 0, 0)),
        ),
        (
            "no node, AI_CANONNAME",
            None,
            Some(c"80"),
            Some((libc::AI_CANONNAME, 0, 0, 0)),
        ),
        (
            "localhost, family 12345",
            Some(c"localhost"),
            None,
            Some((0, 12345, 0, 0)),
        ),
        (
            "localhost, socktype 12345",
            Some(c"localhost"),
            None,
            Some((0, 0, 12345, 0)),
        ),
        (
            "localhost, udp, protocol tcp",
            Some(c"localhost"),
            None,
            Some((0, 0, libc::SOCK_DGRAM, libc::IPPROTO_TCP)),
        ),
        (
            "localhost, AI_ADDRCONFIG",
            Some(c"localhost"),
            None,
            Some((libc::AI_ADDRCONFIG, 0, stream, 0)),
        ),
        (
            "localhost, AI_V4MAPPED|AI_ALL, AF_INET6",
            Some(c"localhost"),
            None,
            Some((libc::AI_V4MAPPED | libc::AI_ALL, libc::AF_INET6, stream, 0)),
        ),
        ("empty node", Some(c""), None, None),
    ];
    list.into_iter()
        .map(|(name, node, service, hints)| {
            case(name, move |api| do_getaddrinfo(api, node, service, hints))
        })
        .collect()
}

/// A getnameinfo input address.
#[derive(Clone, Copy, Debug)]
pub(crate) enum NiAddr {
    V4([u8; 4], u16),
    V6Loopback(u16),
    Unix,
}

pub(crate) fn do_getnameinfo(
    api: &Api,
    a: NiAddr,
    salen: Option<socklen_t>,
    hostlen: Option<usize>,
    servlen: Option<usize>,
    flags: c_int,
) -> Record {
    let v4 = match a {
        NiAddr::V4(ip, port) => sin(ip, port),
        _ => sin([0; 4], 0),
    };
    let v6 = sin6_loopback(match a {
        NiAddr::V6Loopback(port) => port,
        _ => 0,
    });
    let (un, unlen) = unix_addr("x");
    let (ap, len): (*const sockaddr, socklen_t) = match a {
        NiAddr::V4(..) => (sa(&v4), sa_len::<libc::sockaddr_in>()),
        NiAddr::V6Loopback(_) => (sa(&v6), sa_len::<libc::sockaddr_in6>()),
        NiAddr::Unix => (sa(&un), unlen),
    };
    let host = hostlen.map(Buf::new);
    let serv = servlen.map(Buf::new);
    let hp = mut_ptr::<c_char>(&host);
    let sp = mut_ptr::<c_char>(&serv);
    let hl = hostlen.unwrap_or(0) as socklen_t;
    let sl = servlen.unwrap_or(0) as socklen_t;
    // SAFETY: a valid address of its length, our buffers of theirs.
    let (r, e) =
        call(|| unsafe { (api.getnameinfo)(ap, salen.unwrap_or(len), hp, hl, sp, sl, flags) });
    let mut rec = Record::new(r, e);
    if let Some(b) = &host {
        rec = rec.out("host", b.bytes());
    }
    if let Some(b) = &serv {
        rec = rec.out("serv", b.bytes());
    }
    rec
}

/// A getnameinfo case: name, address, its length (if not its own), the
/// host and serv buffers' sizes (none: null), flags.
pub(crate) type NiRow = (
    &'static str,
    NiAddr,
    Option<socklen_t>,
    Option<usize>,
    Option<usize>,
    c_int,
);

pub(crate) fn getnameinfo_cases() -> Vec<Case> {
    let lo = NiAddr::V4([127, 0, 0, 1], 80);
    let num = libc::NI_NUMERICHOST | libc::NI_NUMERICSERV;
    let list: Vec<NiRow> = vec![
        ("127.0.0.1:80, numeric", lo, None, Some(64), Some(32), num),
        ("127.0.0.1:80, names", lo, None, Some(64), Some(32), 0),
        (
            "127.0.0.1:80, NI_NAMEREQD",
            lo,
            None,
            Some(64),
            Some(32),
            libc::NI_NAMEREQD,
        ),
        (
            "127.0.0.1:80, NI_DGRAM",
            lo,
            None,
            Some(64),
            Some(32),
            libc::NI_DGRAM,
        ),
        (
            "127.0.0.1:8080, NI_NOFQDN",
            NiAddr::V4([127, 0, 0, 1], 8080),
            None,
            Some(64),
            Some(32),
            libc::NI_NOFQDN,
        ),
        (
            "::1 port 443, numeric",
            NiAddr::V6Loopback(443),
            None,
            Some(64),
            Some(32),
            num,
        ),
        (
            "::1 port 443, names",
            NiAddr::V6Loopback(443),
            None,
            Some(64),
            Some(32),
            0,
        ),
        (
            "192.0.2.1:9, names (no reverse entry)",
            NiAddr::V4([192, 0, 2, 1], 9),
            None,
            Some(64),
            Some(32),
            0,
        ),
        (
            "192.0.2.1:9, NI_NAMEREQD (no reverse entry)",
            NiAddr::V4([192, 0, 2, 1], 9),
            None,
            Some(64),
            Some(32),
            libc::NI_NAMEREQD,
        ),
        (
            "127.0.0.1:80, host buffer of 1",
            lo,
            None,
            Some(1),
            Some(32),
            0,
        ),
        (
            "127.0.0.1:80, numeric, host buffer of 9",
            lo,
            None,
            Some(9),
            Some(32),
            num,
        ),
        (
            "127.0.0.1:80, numeric, host buffer of 10",
            lo,
            None,
            Some(10),
            Some(32),
            num,
        ),
        (
            "127.0.0.1:80, serv buffer of 1",
            lo,
            None,
            Some(64),
            Some(1),
            0,
        ),
        (
            "127.0.0.1:80, address length 3",
            lo,
            Some(3),
            Some(64),
            Some(32),
            num,
        ),
        (
            "127.0.0.1:80, address length 200",
            lo,
            Some(200),
            Some(64),
            Some(32),
            num,
        ),
        ("a unix address", NiAddr::Unix, None, Some(64), Some(32), 0),
        ("127.0.0.1:80, no host, no serv", lo, None, None, None, 0),
        ("127.0.0.1:80, serv only", lo, None, None, Some(32), 0),
        ("127.0.0.1:80, host only", lo, None, Some(64), None, 0),
        (
            "127.0.0.1:80, unknown flags",
            lo,
            None,
            Some(64),
            Some(32),
            0x4000,
        ),
    ];
    list.into_iter()
        .map(|(name, a, salen, hl, sl, flags)| {
            case(name, move |api| {
                do_getnameinfo(api, a, salen, hl, sl, flags)
            })
        })
        .collect()
}

pub(crate) fn do_gethostbyname(api: &Api, name: &'static CStr) -> Record {
    set_h_errno(H_SENTINEL);
    // SAFETY: a NUL-terminated name.
    let (h, e) = call(|| unsafe { (api.gethostbyname)(name.as_ptr()) });
    let he = h_errno();
    Record::new(!h.is_null() as i64, e)
        .int("h_errno", he)
        .out("hostent", describe_hostent(h, None))
}

/// Four lookups of different numeric names, ten times each, in four
/// fibers at once (one after another elsewhere): each reads back the
/// answer to its own name.
pub(crate) fn do_gethostbyname_interleaved(api: &Api) -> Record {
    let wrong = Arc::new(AtomicUsize::new(0));
    let names: [&'static CStr; 4] = [c"127.0.0.1", c"127.0.0.2", c"127.0.0.3", c"127.0.0.4"];
    let bodies: Vec<Box<dyn FnOnce()>> = names
        .iter()
        .enumerate()
        .map(|(i, &name)| {
            let wrong = wrong.clone();
            let f = api.gethostbyname;
            Box::new(move || {
                for _ in 0..10 {
                    // SAFETY: a NUL-terminated name.
                    let h = unsafe { f(name.as_ptr()) };
                    let got = describe_hostent(h, None);
                    let want = format!(
                        "name={} type=2 length=4 addr=7f00000{}",
                        name.to_str().unwrap(),
                        i + 1
                    );
                    if got != want.as_bytes() {
                        wrong.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }) as Box<dyn FnOnce()>
        })
        .collect();
    api.concurrently(bodies);
    Record::new(0, 0).int(
        "lookups_that_read_another_s_answer",
        wrong.load(Ordering::Relaxed),
    )
}

pub(crate) fn gethostbyname_cases() -> Vec<Case> {
    let mut v: Vec<Case> = [
        ("localhost", c"localhost"),
        ("vm (an /etc/hosts alias)", c"vm"),
        ("127.0.0.1", c"127.0.0.1"),
        ("127.1", c"127.1"),
        ("::1", c"::1"),
        ("empty name", c""),
        (
            "no-such-host.invalid (resolver, no network)",
            c"no-such-host.invalid",
        ),
        ("999.1.1.1", c"999.1.1.1"),
    ]
    .into_iter()
    .map(|(n, name)| case(n, move |api| do_gethostbyname(api, name)))
    .collect();
    v.push(case(
        "four lookups at once, each reading its own answer",
        do_gethostbyname_interleaved,
    ));
    v
}

pub(crate) fn do_gethostbyname_r(api: &Api, name: &'static CStr, buflen: usize) -> Record {
    let ret = Buf::new(size_of::<hostent>());
    let buf = Buf::new(buflen);
    let unset = 0x5a5a_5a5a_usize as *mut hostent;
    let mut result = unset;
    let herr = Buf::new(size_of::<c_int>());
    herr.put(0, H_SENTINEL);
    set_h_errno(H_SENTINEL);
    // SAFETY: a NUL-terminated name, our hostent, buffer (of `buflen`),
    // result and h_errno.
    let (r, e) = call(|| unsafe {
        (api.gethostbyname_r)(
            name.as_ptr(),
            ret.cast(),
            buf.cast(),
            buflen,
            &mut result,
            herr.cast(),
        )
    });
    let res = if result == unset {
        "untouched".to_string()
    } else if result.is_null() {
        "null".to_string()
    } else if result == ret.cast() {
        "the hostent given".to_string()
    } else {
        "elsewhere".to_string()
    };
    let mut rec = Record::new(r, e)
        .int("result", res)
        .int("h_errnop", herr.get::<c_int>(0))
        .int("h_errno", h_errno())
        .out("buf_canary", buf.canary())
        .out("hostent_canary", ret.canary());
    if result == ret.cast() {
        rec = rec.out("hostent", describe_hostent(result, Some(&buf)));
    }
    rec
}

pub(crate) fn gethostbyname_r_cases() -> Vec<Case> {
    [
        ("localhost, 1024 bytes", c"localhost", 1024),
        ("localhost, 8 bytes (ERANGE)", c"localhost", 8),
        ("localhost, 0 bytes", c"localhost", 0),
        ("vm (an /etc/hosts alias), 1024 bytes", c"vm", 1024),
        ("127.0.0.1, 1024 bytes", c"127.0.0.1", 1024),
        ("127.0.0.1, 16 bytes", c"127.0.0.1", 16),
        ("empty name, 1024 bytes", c"", 1024),
        (
            "no-such-host.invalid (resolver, no network), 1024 bytes",
            c"no-such-host.invalid",
            1024,
        ),
    ]
    .into_iter()
    .map(|(n, name, len)| case(n, move |api| do_gethostbyname_r(api, name, len)))
    .collect()
}
