//! This runtime's part of a fiber dump: the requests the root loop kept
//! (see [`Core::take_remote`]) answered with a [`Section`] of its fibers.

use super::*;
use crate::scheduler::stack_trace::{self, walk::RawStack};

impl Core {
    /// Answers the dump requests [`Core::take_remote`] kept, if any.
    #[cold]
    #[inline(never)]
    pub(super) fn answer_dumps(&self) {
        // SAFETY: on the runtime's thread; short borrow, ended before the
        // answers (user code).
        let dumps = std::mem::take(&mut unsafe { self.local() }.dumps);
        for answer in dumps {
            answer(self.dump_section(false));
        }
    }

    /// This runtime's fibers, for a dump, with their stacks' return
    /// addresses (named later, off this thread: see `observe::dump_names::resolve`).
    /// `asker`: called by the context that asked for the dump (rather than
    /// by the root loop, answering a request from another thread), which
    /// is listed with its own stack, the root too when it runs
    /// `block_on`'s closure.
    pub(crate) fn dump_section(&self, asker: bool) -> Section {
        // The stack walks below run libgcc's unwinder, which only reads the
        // stacks and the unwind info (see `stack_trace`).
        // SAFETY: on the runtime's thread; the borrow ends with this
        // function, and nothing in it calls user code.
        let l = unsafe { self.local() };
        let now = clock::now_ns();
        let current = l.current;
        // The root runs user code now: it is `block_on`'s closure, asking.
        let root_asks = asker && current == ROOT && l.entered && l.in_callback.is_none();
        let mut stacks = Vec::new();
        let mut fibers = l
            .fibers
            .iter()
            .filter(|(key, rec)| *key != ROOT || rec.state != State::Running || root_asks)
            .filter(|(_, rec)| rec.state != State::Done)
            .enumerate()
            .map(|(i, (key, rec))| {
                let parked = rec.state == State::Parked;
                let waiting = rec.waiting_on.get().filter(|_| parked);
                if let Some(raw) = Self::walk(key, rec, current) {
                    stacks.push((i, raw));
                }
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
                    cpu_time: self.run_time(l, key, rec),
                    stack: None,
                    group: None,
                    in_group: None,
                }
            })
            .collect::<Vec<_>>();
        if let Some(groups) = crate::scheduler::fiber_info::GROUPS.get() {
            // The fiber layer names each member's group, from what it keeps
            // on this thread; it runs no user code and does not touch the
            // runtime (see `fiber_info::GROUPS`).
            groups(&mut fibers);
        }
        Section {
            thread: self.shared.thread_name.clone(),
            fibers: Some(fibers),
            stalled: None,
            stalled_stack: None,
            held_note: None,
            busy: None,
            stacks,
        }
    }

    /// How long `rec`'s context has run, if this runtime counts (see
    /// `scheduler::cpu_time`); `None` for the root.
    fn run_time(&self, l: &Local, key: Key, rec: &Record) -> Option<std::time::Duration> {
        if !l.count_time || key == ROOT {
            return None;
        }
        if rec.sp.is_null() || first_frame::deferred(rec.sp).is_some() {
            return Some(std::time::Duration::ZERO); // it has not run
        }
        // A started context's `meta` is written (its first switch built
        // it) and stays so while its record lives; we are on its thread.
        // SAFETY: as argued just above.
        let mut ticks = unsafe { (*rec.meta).run_ticks() };
        if key == l.current {
            ticks += crate::scheduler::cpu_time::now().wrapping_sub(l.switched_at);
        }
        crate::scheduler::cpu_time::to_duration(ticks)
    }

    /// The return addresses of `rec`'s stack: the running context's from
    /// here (the dump's own frames and, for the root loop answering, the
    /// loop's, are folded away later), a suspended one's from its saved
    /// switch frame. `None` for a fiber that has not started.
    fn walk(key: Key, rec: &Record, current: Key) -> Option<RawStack> {
        if key == current {
            return Some(stack_trace::walk::current());
        }
        if !matches!(rec.state, State::Parked | State::Ready)
            || rec.sp.is_null()
            || first_frame::deferred(rec.sp).is_some()
        {
            return None;
        }
        // A context that is not the running one has saved its stack
        // pointer with its last switch out (or has the first frame
        // `init_stack` built), and stays suspended while this runs: no
        // switch happens in a dump. Its stack is mapped: the record owns
        // it (or, for the root, it is the thread's; inside a generator,
        // the generator it drives is alive on it).
        // SAFETY: as argued above.
        unsafe { stack_trace::walk::parked(rec.sp) }
    }
}
