//! `recvmsg`: on every source of `sources.rs`, and with the address,
//! iovec and control room of its msghdr cut or missing, control messages
//! (IP_PKTINFO, fds passed with SCM_RIGHTS, an error queued) and flags.

use std::mem;
use std::ptr;
use std::time::Instant;

use libc::{c_int, msghdr, socklen_t};

use crate::api::Api;
use crate::harness::{Case, Record, case};
use crate::mem::Buf;
use crate::net::{norm_addr, scrub_rights};
use crate::reads::{iov_bufs, record_iov_bufs};
use crate::sources::{
    MakeSrc, Src, read_sources, s_tcp_data, s_tcp_data_bound, s_tcp_empty_bound, s_tcp_nonblock,
    s_tcp_oob, s_tcp_part_timeo, s_tcp_two_late, s_udp, s_udp_errqueue, s_udp_pktinfo_fresh,
    s_unix_rights,
};
use crate::sys::{PROMPT_MS, call, elapsed_ms};

/// The arguments of a recvmsg.
#[derive(Clone, Debug)]
pub(crate) struct MsgArg {
    /// Room for the address (0: none).
    name: usize,
    /// The iovecs' lengths.
    iov: Vec<usize>,
    /// How many iovecs msg_iovlen says (`None`: as many as there are).
    iovlen: Option<usize>,
    /// Room for control messages (0: none).
    control: usize,
    /// The msghdr itself is null.
    null: bool,
}

impl MsgArg {
    fn plain() -> MsgArg {
        MsgArg {
            name: 128,
            iov: vec![8, 56],
            iovlen: None,
            control: 64,
            null: false,
        }
    }
}

pub(crate) fn do_recvmsg(api: &Api, src: Src, arg: &MsgArg, flags: c_int, prompt: bool) -> Record {
    let name = Buf::new(arg.name);
    let (bufs, mut iov) = iov_bufs(&arg.iov);
    let control = Buf::new(arg.control);
    let msg = Buf::zeroed(size_of::<msghdr>());
    // SAFETY: all-zero is a valid msghdr.
    let mut m: msghdr = unsafe { mem::zeroed() };
    if arg.name > 0 {
        m.msg_name = name.cast();
        m.msg_namelen = arg.name as socklen_t;
    }
    m.msg_iov = iov.as_mut_ptr();
    m.msg_iovlen = arg.iovlen.unwrap_or(iov.len());
    if arg.control > 0 {
        m.msg_control = control.cast();
        m.msg_controllen = arg.control;
    }
    m.msg_flags = 0x5a5a;
    msg.put(0, m);
    let mp = if arg.null {
        ptr::null_mut()
    } else {
        msg.cast()
    };
    let t = Instant::now();
    // SAFETY: a msghdr pointing to our buffers, of the lengths it says.
    let (r, e) = call(|| unsafe { (api.recvmsg)(src.fd, mp, flags) });
    let waited = elapsed_ms(t);
    let after: msghdr = msg.get(0);
    let mut cbytes = control.bytes();
    let fds = scrub_rights(&control, after.msg_controllen, &mut cbytes);
    let mut rec = Record::new(r, e)
        .out("name", norm_addr(&name.bytes(), src.from_port))
        .int("namelen", after.msg_namelen);
    rec = record_iov_bufs(rec, &bufs)
        .out("control", cbytes)
        .int("controllen", after.msg_controllen)
        .int("msg_flags", format!("{:#x}", after.msg_flags))
        .flag(
            "pointers_intact",
            after.msg_name == m.msg_name
                && after.msg_iov == m.msg_iov
                && after.msg_iovlen == m.msg_iovlen
                && after.msg_control == m.msg_control,
        )
        .out("received_fds", fds)
        .out("msghdr_canary", msg.canary());
    if prompt {
        rec = rec.flag("returned_without_waiting", waited < PROMPT_MS);
    }
    src.finish(rec)
}

pub(crate) fn recvmsg_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for (name, make) in read_sources() {
        v.push(case(name, move |api| {
            do_recvmsg(api, make(), &MsgArg::plain(), 0, false)
        }));
    }
    let small = |iov: Vec<usize>, control: usize| MsgArg {
        iov,
        control,
        ..MsgArg::plain()
    };
    let cases: Vec<(&str, MakeSrc, MsgArg, c_int, bool)> = vec![
        (
            "udp, two datagrams, 4-byte buffer (MSG_TRUNC)",
            s_udp,
            small(vec![4], 64),
            0,
            false,
        ),
        (
            "udp, IP_PKTINFO",
            s_udp_pktinfo_fresh,
            MsgArg::plain(),
            0,
            false,
        ),
        (
            "udp, IP_PKTINFO, 8 bytes of control room (MSG_CTRUNC)",
            s_udp_pktinfo_fresh,
            small(vec![64], 8),
            0,
            false,
        ),
        (
            "udp, IP_PKTINFO, no control room",
            s_udp_pktinfo_fresh,
            small(vec![64], 0),
            0,
            false,
        ),
        (
            "unix stream, an fd passed",
            s_unix_rights,
            MsgArg::plain(),
            0,
            false,
        ),
        (
            "unix stream, an fd passed, MSG_CMSG_CLOEXEC",
            s_unix_rights,
            MsgArg::plain(),
            libc::MSG_CMSG_CLOEXEC,
            false,
        ),
        (
            "unix stream, an fd passed, no control room",
            s_unix_rights,
            small(vec![64], 0),
            0,
            false,
        ),
        (
            "udp with an error queued, MSG_ERRQUEUE",
            s_udp_errqueue,
            MsgArg::plain(),
            libc::MSG_ERRQUEUE,
            true,
        ),
        (
            "tcp, SO_RCVTIMEO 300 ms, empty, MSG_ERRQUEUE",
            s_tcp_empty_bound,
            MsgArg::plain(),
            libc::MSG_ERRQUEUE,
            true,
        ),
        (
            "tcp with data, SO_RCVTIMEO 300 ms, MSG_ERRQUEUE",
            s_tcp_data_bound,
            MsgArg::plain(),
            libc::MSG_ERRQUEUE,
            true,
        ),
        (
            "tcp with data, MSG_PEEK",
            s_tcp_data,
            MsgArg::plain(),
            libc::MSG_PEEK,
            false,
        ),
        (
            "tcp with data, MSG_DONTWAIT",
            s_tcp_data,
            MsgArg::plain(),
            libc::MSG_DONTWAIT,
            false,
        ),
        (
            "tcp non-blocking, empty",
            s_tcp_nonblock,
            MsgArg::plain(),
            0,
            false,
        ),
        (
            "tcp with data, SO_RCVTIMEO 30 ms, MSG_WAITALL for more",
            s_tcp_part_timeo,
            MsgArg::plain(),
            libc::MSG_WAITALL,
            false,
        ),
        (
            "tcp, data in two parts, MSG_WAITALL for both",
            s_tcp_two_late,
            small(vec![6, 7], 0),
            libc::MSG_WAITALL,
            false,
        ),
        (
            "tcp with urgent data, MSG_OOB",
            s_tcp_oob,
            MsgArg::plain(),
            libc::MSG_OOB,
            false,
        ),
        (
            "tcp with data, no iovecs",
            s_tcp_data,
            MsgArg {
                iovlen: Some(0),
                ..MsgArg::plain()
            },
            0,
            false,
        ),
        (
            "tcp with data, 1025 iovecs",
            s_tcp_data,
            MsgArg {
                iov: vec![1; 1025],
                ..MsgArg::plain()
            },
            0,
            false,
        ),
        (
            "udp, two datagrams, 1025 iovecs",
            s_udp,
            MsgArg {
                iov: vec![1; 1025],
                ..MsgArg::plain()
            },
            0,
            false,
        ),
        (
            "udp, two datagrams, no name room",
            s_udp,
            MsgArg {
                name: 0,
                ..MsgArg::plain()
            },
            0,
            false,
        ),
        (
            "udp, two datagrams, 4 bytes of name room",
            s_udp,
            MsgArg {
                name: 4,
                ..MsgArg::plain()
            },
            0,
            false,
        ),
        (
            "tcp with data, null msghdr",
            s_tcp_data,
            MsgArg {
                null: true,
                ..MsgArg::plain()
            },
            0,
            false,
        ),
    ];
    for (name, make, arg, flags, prompt) in cases {
        v.push(case(name, move |api| {
            do_recvmsg(api, make(), &arg, flags, prompt)
        }));
    }
    v
}
