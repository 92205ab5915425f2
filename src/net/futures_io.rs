//! `futures_io::AsyncRead` and `AsyncWrite` for fibra's stream sockets
//! (feature `futures-io`), readiness-based, on fibra's reactor.
//!
//! A poll tries the syscall; only when it says `WouldBlock` is the task's
//! `Waker` registered with the reactor of the runtime entered on the
//! polling thread, for that socket and direction, and the poll returns
//! `Pending`. No helper fiber, no thread, and no syscall beyond the one
//! that moves the data when data is there. The reactor wakes the waker
//! from its poll loop after its own state is no longer borrowed, so the
//! waker may be anything: the one of `fibra::block_on_future` in a fiber,
//! of a thread in `futures::executor::block_on`, of a tokio task.
//!
//! Only the last task to poll a direction of a socket is woken (tokio's
//! sockets behave the same): two tasks reading one socket at once through
//! `&T` would take turns being forgotten. Fibers and tasks may wait on one
//! socket at once.
//!
//! Where a socket is polled decides who watches it:
//!
//! - On a thread with a fibra runtime (a fiber, `block_on`'s closure):
//!   that runtime's reactor. A socket may be polled on one runtime and then
//!   on another; a registration left in the first is forgotten when the
//!   socket is dropped there, or when its fd number is reused there;
//!   until then it may wake its task once more, spuriously.
//! - On a thread without one (a tokio worker, `futures::executor`): a
//!   process-wide *fallback* reactor, a fibra runtime on a thread of its
//!   own (`fibra-io`) started on first use. Registering there costs a
//!   message to that thread; everything else is the same. (tokio panics
//!   here — "no reactor running"; fibra works, a little slower.)
//!
//! A socket dropped while a waker is registered leaks nothing and wakes
//! nobody: the registration is keyed by the socket's process-unique id and
//! a generation, the waker is dropped (not woken), and a later socket with
//! the same fd number never sees the old one's events.
//!
//! Socket timeouts (`set_read_timeout`) apply to the blocking calls only;
//! an async caller bounds a wait with a timer of its own (such as
//! [`Sleep`](crate::Sleep)).

/// `AsyncRead` and `AsyncWrite` for a stream type (field `sock`) and `&`
/// it. Empty buffers return 0 at once, as the blocking calls do;
/// `poll_close` shuts the write half down.
macro_rules! async_io {
    ($($ty:ty),*) => {$(
        impl ::futures_io::AsyncRead for &$ty {
            fn poll_read(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                buf: &mut [u8],
            ) -> ::std::task::Poll<::std::io::Result<usize>> {
                if buf.is_empty() {
                    return ::std::task::Poll::Ready(Ok(0));
                }
                self.sock.poll_stream(cx, $crate::io::Interest::READABLE, buf.len(), |mut s| {
                    ::std::io::Read::read(&mut s, buf)
                })
            }
            fn poll_read_vectored(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                bufs: &mut [::std::io::IoSliceMut<'_>],
            ) -> ::std::task::Poll<::std::io::Result<usize>> {
                if bufs.iter().all(|b| b.is_empty()) {
                    return ::std::task::Poll::Ready(Ok(0));
                }
                let len = $crate::net::macros::vectored_len(bufs.iter().map(|b| b.len()));
                self.sock.poll_stream(cx, $crate::io::Interest::READABLE, len, |mut s| {
                    ::std::io::Read::read_vectored(&mut s, bufs)
                })
            }
        }
        impl ::futures_io::AsyncWrite for &$ty {
            fn poll_write(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                buf: &[u8],
            ) -> ::std::task::Poll<::std::io::Result<usize>> {
                if buf.is_empty() {
                    return ::std::task::Poll::Ready(Ok(0));
                }
                self.sock.poll_stream(cx, $crate::io::Interest::WRITABLE, buf.len(), |mut s| {
                    ::std::io::Write::write(&mut s, buf)
                })
            }
            fn poll_write_vectored(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                bufs: &[::std::io::IoSlice<'_>],
            ) -> ::std::task::Poll<::std::io::Result<usize>> {
                let len = $crate::net::macros::vectored_len(bufs.iter().map(|b| b.len()));
                if len == 0 {
                    return ::std::task::Poll::Ready(Ok(0));
                }
                self.sock.poll_stream(cx, $crate::io::Interest::WRITABLE, len, |mut s| {
                    ::std::io::Write::write_vectored(&mut s, bufs)
                })
            }
            fn poll_flush(
                self: ::std::pin::Pin<&mut Self>,
                _cx: &mut ::std::task::Context<'_>,
            ) -> ::std::task::Poll<::std::io::Result<()>> {
                ::std::task::Poll::Ready(Ok(())) // nothing is buffered
            }
            fn poll_close(
                self: ::std::pin::Pin<&mut Self>,
                _cx: &mut ::std::task::Context<'_>,
            ) -> ::std::task::Poll<::std::io::Result<()>> {
                ::std::task::Poll::Ready(match self.shutdown(::std::net::Shutdown::Write) {
                    // The peer may have gone first: closed is closed.
                    Err(e) if e.kind() == ::std::io::ErrorKind::NotConnected => Ok(()),
                    r => r,
                })
            }
        }
        impl ::futures_io::AsyncRead for $ty {
            fn poll_read(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                buf: &mut [u8],
            ) -> ::std::task::Poll<::std::io::Result<usize>> {
                ::std::pin::Pin::new(&mut &*self).poll_read(cx, buf)
            }
            fn poll_read_vectored(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                bufs: &mut [::std::io::IoSliceMut<'_>],
            ) -> ::std::task::Poll<::std::io::Result<usize>> {
                ::std::pin::Pin::new(&mut &*self).poll_read_vectored(cx, bufs)
            }
        }
        impl ::futures_io::AsyncWrite for $ty {
            fn poll_write(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                buf: &[u8],
            ) -> ::std::task::Poll<::std::io::Result<usize>> {
                ::std::pin::Pin::new(&mut &*self).poll_write(cx, buf)
            }
            fn poll_write_vectored(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                bufs: &[::std::io::IoSlice<'_>],
            ) -> ::std::task::Poll<::std::io::Result<usize>> {
                ::std::pin::Pin::new(&mut &*self).poll_write_vectored(cx, bufs)
            }
            fn poll_flush(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
            ) -> ::std::task::Poll<::std::io::Result<()>> {
                ::std::pin::Pin::new(&mut &*self).poll_flush(cx)
            }
            fn poll_close(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
            ) -> ::std::task::Poll<::std::io::Result<()>> {
                ::std::pin::Pin::new(&mut &*self).poll_close(cx)
            }
        }
    )*};
}
pub(crate) use async_io;
