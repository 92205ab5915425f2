//! How fibra tells its user something: to the `tracing` subscriber when
//! one is set, and otherwise to stderr, so that a stall, a starvation or a
//! deadlock is never told to no one (Go prints its deadlock with no setup
//! either).
//!
//! A call site formats its message once, then hands [`tell`] the event to
//! emit when a subscriber listens and the text to print when none does:
//!
//! ```text
//! fibra WARN fibra::deadlock: all 2 fibers of thread "main" have waited 1s on ...
//! <the dump, or the stack, below it, as the event carries it>
//! ```
//!
//! "No subscriber" means the dispatcher in effect where the call is made
//! is tracing's `NoSubscriber`: no global default was set and no scoped
//! one is in effect on this thread. A subscriber that filters fibra's
//! targets out is a choice the user made, and is respected. The lowest
//! floor of the house (it imports nothing of fibra), so that every layer
//! from the stacks up tells things the same way.

use std::fmt;
use std::io::Write;

/// How grave a message is, as tracing's levels name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Level {
    Warn,
    Error,
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Level::Warn => "WARN",
            Level::Error => "ERROR",
        })
    }
}

/// Whether no `tracing` subscriber is in effect on this thread: fibra's
/// messages then go to stderr.
pub(crate) fn no_subscriber() -> bool {
    tracing::dispatcher::get_default(|d| d.is::<tracing::subscriber::NoSubscriber>())
}

/// Tells a message: `event` emits it to the subscriber when one is set;
/// otherwise `message` goes to stderr with `below` (a dump, a stack, or
/// nothing) under it.
pub(crate) fn tell(
    level: Level,
    target: &str,
    message: &str,
    below: Option<&dyn fmt::Display>,
    event: impl FnOnce(),
) {
    if no_subscriber() {
        to_stderr(level, target, message, below);
    } else {
        event();
    }
}

/// Prints a message to stderr in one write, so that the lines of two
/// threads' messages do not interleave: `fibra LEVEL target: message`,
/// then `below` on the lines after it.
pub(crate) fn to_stderr(
    level: Level,
    target: &str,
    message: &str,
    below: Option<&dyn fmt::Display>,
) {
    let text = render(level, target, message, below);
    // A closed or full stderr loses the message; there is no one else to
    // tell that to.
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// [`to_stderr`]'s text, ending in a newline.
fn render(level: Level, target: &str, message: &str, below: Option<&dyn fmt::Display>) -> String {
    let mut text = format!("fibra {level} {target}: {}\n", message.trim_end());
    if let Some(below) = below {
        let below = below.to_string();
        let below = below.trim_end();
        if !below.is_empty() {
            text.push_str(below);
            text.push('\n');
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_is_one_line_then_what_is_below_it() {
        let stack = "  0: main\n  1: start\n";
        let text = render(
            Level::Warn,
            "fibra::stall",
            "fiber #3 has run for 1s",
            Some(&stack),
        );
        assert_eq!(
            text,
            "fibra WARN fibra::stall: fiber #3 has run for 1s\n  0: main\n  1: start\n"
        );
        assert_eq!(
            render(Level::Error, "fibra", "epoll_wait failed\n", None),
            "fibra ERROR fibra: epoll_wait failed\n"
        );
    }

    #[test]
    fn messages_go_to_stderr_only_while_no_subscriber_is_set() {
        assert!(no_subscriber());
        let subscriber = tracing_subscriber::fmt()
            .with_writer(std::io::sink)
            .finish();
        tracing::subscriber::with_default(subscriber, || assert!(!no_subscriber()));
        assert!(no_subscriber());
    }
}
