//! This runtime's part of a fiber dump: the requests the root loop kept
//! (see [`Core::take_remote`]) answered with a [`Section`] of its fibers.

use super::*;

impl Core {
    /// Answers the dump requests [`Core::take_remote`] kept, if any.
    #[cold]
    #[inline(never)]
    pub(super) fn answer_dumps(&self) {
        // SAFETY: on the runtime's thread; short borrow, ended before the
        // answers (user code).
        let dumps = std::mem::take(&mut unsafe { self.local() }.dumps);
        for answer in dumps {
            answer(self.dump_section());
        }
    }

    /// This runtime's fibers, for a dump.
    pub(crate) fn dump_section(&self) -> Section {
        // SAFETY: on the runtime's thread; short borrow.
        let l = unsafe { self.local() };
        let now = clock::now_ns();
        let fibers = l
            .fibers
            .iter()
            .filter(|(key, rec)| *key != ROOT || rec.state != State::Running)
            .filter(|(_, rec)| rec.state != State::Done)
            .map(|(key, rec)| {
                let parked = rec.state == State::Parked;
                let waiting = rec.waiting_on.get().filter(|_| parked);
                FiberInfo {
                    id: rec.id,
                    name: rec.name.as_deref().map(str::to_owned),
                    root: key == ROOT,
                    state: match rec.state {
                        State::Ready => FiberState::Ready,
                        State::Parked => FiberState::Parked,
                        State::Running | State::Done | State::Vacant => FiberState::Running,
                    },
                    waiting_on: waiting.map(|on| on.to_string()),
                    deadline_in: waiting
                        .and((rec.waiting_until != NO_DEADLINE).then_some(rec.waiting_until))
                        .map(|d| std::time::Duration::from_nanos(d.saturating_sub(now))),
                    running_for: None,
                    spawned_at: rec.spawned_at(),
                    // A context not running has saved its stack pointer in
                    // its own stack.
                    stack_used: match (&rec.stack, rec.state) {
                        (Some(stack), State::Parked | State::Ready) => {
                            // (Not when it parked inside a generator: its
                            // sp is on the generator's stack then.)
                            let (base, top) = (stack.base() as usize, stack.top() as usize);
                            let sp = rec.sp as usize;
                            (base..top).contains(&sp).then(|| top - sp)
                        }
                        _ => None,
                    },
                }
            })
            .collect();
        Section {
            thread: self.shared.thread_name.clone(),
            fibers: Some(fibers),
            stalled: None,
        }
    }
}
