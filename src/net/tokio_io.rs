//! `tokio::io::AsyncRead` and `AsyncWrite` for fibra's stream sockets
//! (feature `tokio-io`): tokio's traits only, no tokio runtime. They are
//! the `futures-io` ones (see `futures_io.rs`, which this feature turns on)
//! in tokio's shape: the same poll, woken by fibra's reactor, so crates
//! written against tokio's traits — tokio-postgres, tokio-rustls,
//! tokio-tungstenite — do their I/O over fibra's sockets.
//!
//! A read fills the unfilled part of tokio's `ReadBuf` without zeroing it
//! first: the kernel writes the bytes (`recv`), and only the count it
//! reports is marked initialized.

/// `AsyncRead` and `AsyncWrite` (tokio's) for a stream type (field `sock`)
/// and `&` it.
macro_rules! tokio_io {
    ($($ty:ty),*) => {$(
        impl ::tokio::io::AsyncRead for &$ty {
            fn poll_read(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                buf: &mut ::tokio::io::ReadBuf<'_>,
            ) -> ::std::task::Poll<::std::io::Result<()>> {
                // SAFETY: the slice is only written by `recv` (the kernel
                // writes bytes, it never de-initializes any).
                let unfilled = unsafe { buf.unfilled_mut() };
                let len = unfilled.len();
                if len == 0 {
                    return ::std::task::Poll::Ready(Ok(()));
                }
                let mut recv = $crate::net::registration::StreamBuf::recv_uninit(unfilled);
                let polled = self.sock.poll_stream(cx, $crate::io::Interest::READABLE, len, |s| {
                    recv.call(::std::os::fd::AsRawFd::as_raw_fd(s))
                });
                match polled {
                    ::std::task::Poll::Ready(Ok(n)) => {
                        // SAFETY: `recv` wrote `n` bytes (at most `len`)
                        // at the start of the unfilled part.
                        unsafe { buf.assume_init(n) };
                        buf.advance(n);
                        ::std::task::Poll::Ready(Ok(()))
                    }
                    ::std::task::Poll::Ready(Err(e)) => ::std::task::Poll::Ready(Err(e)),
                    ::std::task::Poll::Pending => ::std::task::Poll::Pending,
                }
            }
        }
        impl ::tokio::io::AsyncWrite for &$ty {
            fn poll_write(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                buf: &[u8],
            ) -> ::std::task::Poll<::std::io::Result<usize>> {
                ::futures_io::AsyncWrite::poll_write(self, cx, buf)
            }
            fn poll_write_vectored(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                bufs: &[::std::io::IoSlice<'_>],
            ) -> ::std::task::Poll<::std::io::Result<usize>> {
                ::futures_io::AsyncWrite::poll_write_vectored(self, cx, bufs)
            }
            fn is_write_vectored(&self) -> bool {
                true
            }
            fn poll_flush(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
            ) -> ::std::task::Poll<::std::io::Result<()>> {
                ::futures_io::AsyncWrite::poll_flush(self, cx)
            }
            /// Shuts the write half down (a peer that went first is no
            /// error), as tokio's sockets do.
            fn poll_shutdown(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
            ) -> ::std::task::Poll<::std::io::Result<()>> {
                ::futures_io::AsyncWrite::poll_close(self, cx)
            }
        }
        impl ::tokio::io::AsyncRead for $ty {
            fn poll_read(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                buf: &mut ::tokio::io::ReadBuf<'_>,
            ) -> ::std::task::Poll<::std::io::Result<()>> {
                ::tokio::io::AsyncRead::poll_read(::std::pin::Pin::new(&mut &*self), cx, buf)
            }
        }
        impl ::tokio::io::AsyncWrite for $ty {
            fn poll_write(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                buf: &[u8],
            ) -> ::std::task::Poll<::std::io::Result<usize>> {
                ::tokio::io::AsyncWrite::poll_write(::std::pin::Pin::new(&mut &*self), cx, buf)
            }
            fn poll_write_vectored(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                bufs: &[::std::io::IoSlice<'_>],
            ) -> ::std::task::Poll<::std::io::Result<usize>> {
                ::tokio::io::AsyncWrite::poll_write_vectored(::std::pin::Pin::new(&mut &*self), cx, bufs)
            }
            fn is_write_vectored(&self) -> bool {
                true
            }
            fn poll_flush(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
            ) -> ::std::task::Poll<::std::io::Result<()>> {
                ::tokio::io::AsyncWrite::poll_flush(::std::pin::Pin::new(&mut &*self), cx)
            }
            fn poll_shutdown(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
            ) -> ::std::task::Poll<::std::io::Result<()>> {
                ::tokio::io::AsyncWrite::poll_shutdown(::std::pin::Pin::new(&mut &*self), cx)
            }
        }
    )*};
}
pub(crate) use tokio_io;
