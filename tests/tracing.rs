//! `tracing`: a span per fiber (with its id and name), entered while the
//! fiber runs and exited while it is switched out; events for spawn, park,
//! unpark and exit.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

#[derive(Default)]
struct Log {
    spans: Mutex<Vec<(u64, String)>>, // (span id, fields)
    entered: Mutex<Vec<(u64, bool)>>, // (span id, enter = true / exit = false)
    events: Mutex<Vec<String>>,
}

struct Recorder {
    log: Arc<Log>,
    next: AtomicU64,
}

struct Fields(String);

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!("{}={:?} ", field.name(), value));
    }
}

impl Subscriber for Recorder {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let mut fields = Fields(format!("{} ", attrs.metadata().name()));
        attrs.record(&mut fields);
        self.log.spans.lock().unwrap().push((id, fields.0));
        Id::from_u64(id)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = Fields(String::new());
        event.record(&mut fields);
        self.log.events.lock().unwrap().push(fields.0);
    }
    fn enter(&self, span: &Id) {
        self.log
            .entered
            .lock()
            .unwrap()
            .push((span.into_u64(), true));
    }
    fn exit(&self, span: &Id) {
        self.log
            .entered
            .lock()
            .unwrap()
            .push((span.into_u64(), false));
    }
}

#[test]
fn each_fiber_has_a_span_entered_only_while_it_runs() {
    let log = Arc::new(Log::default());
    let recorder = Recorder {
        log: log.clone(),
        next: AtomicU64::new(0),
    };
    let ids = tracing::subscriber::with_default(recorder, || {
        fibra::run(|| {
            let a = fibra::Builder::new()
                .name("alpha".into())
                .spawn(|| {
                    fibra::yield_now();
                    fibra::current().id()
                })
                .unwrap();
            let b = fibra::spawn(|| {
                fibra::yield_now();
                fibra::current().id()
            });
            (a.join().unwrap(), b.join().unwrap())
        })
    });

    let spans = log.spans.lock().unwrap().clone();
    let span_of = |fiber: fibra::FiberId| {
        spans
            .iter()
            .find(|(_, f)| f.contains(&format!("id={} ", fiber.as_u64())))
            .unwrap_or_else(|| panic!("no span for fiber {fiber}: {spans:?}"))
            .clone()
    };
    let (alpha, alpha_fields) = span_of(ids.0);
    let (beta, beta_fields) = span_of(ids.1);
    assert!(alpha_fields.starts_with("fiber ") && alpha_fields.contains("alpha"));
    assert!(beta_fields.starts_with("fiber "));

    // Enter and exit alternate per span (entered at start and after each
    // switch back, exited at each switch away), and two fibers' spans are
    // never entered at once.
    let entered = log.entered.lock().unwrap().clone();
    let mut inside: Option<u64> = None;
    let mut enters = 0;
    for &(span, enter) in entered.iter().filter(|(s, _)| *s == alpha || *s == beta) {
        if enter {
            assert_eq!(inside, None, "two fiber spans entered at once: {entered:?}");
            inside = Some(span);
            enters += 1;
        } else {
            assert_eq!(
                inside,
                Some(span),
                "exit of a span not entered: {entered:?}"
            );
            inside = None;
        }
    }
    assert_eq!(inside, None);
    assert!(
        enters >= 4,
        "each fiber runs twice (it yields once): {entered:?}"
    );

    let events = log.events.lock().unwrap().join("\n");
    for what in ["spawn", "park", "unpark", "exit"] {
        assert!(
            events.contains(&format!("message={what} ")),
            "no {what} event in:\n{events}"
        );
    }
}

#[test]
fn fiber_spans_on_a_runtime_of_workers_name_their_worker() {
    let log = Arc::new(Log::default());
    // Workers are threads of their own: only a global subscriber sees them.
    // (The other tests here set thread-local ones, which take precedence.)
    tracing::subscriber::set_global_default(Recorder {
        log: log.clone(),
        next: AtomicU64::new(0),
    })
    .unwrap();
    let rt = fibra::Runtime::builder().workers(2).build().unwrap();
    let id = rt
        .spawn_on(1, || {
            fibra::Builder::new()
                .name("on-one".into())
                .spawn(|| fibra::current().id())
                .unwrap()
                .join()
                .unwrap()
        })
        .join()
        .unwrap();
    drop(rt);
    let spans = log.spans.lock().unwrap();
    assert!(
        spans
            .iter()
            .any(|(_, f)| f.starts_with("fibra-worker ") && f.contains("worker=1 ")),
        "{spans:?}"
    );
    let fiber = format!("fiber id={} name=\"on-one\" worker=1 ", id.as_u64());
    assert!(
        spans.iter().any(|(_, f)| *f == fiber),
        "{fiber:?} not in {spans:?}"
    );
}

/// Spawns a fiber of its own when the first fiber span is created.
struct SpawnsInNewSpan {
    next: AtomicU64,
    spawned: std::sync::atomic::AtomicBool,
}

impl Subscriber for SpawnsInNewSpan {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        if attrs.metadata().name() == "fiber" && !self.spawned.swap(true, Ordering::Relaxed) {
            drop(fibra::spawn(|| ()));
        }
        Id::from_u64(self.next.fetch_add(1, Ordering::Relaxed) + 1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &Event<'_>) {}
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[test]
fn a_subscriber_that_spawns_while_a_fiber_is_created_does_not_confuse_its_handle() {
    let subscriber = SpawnsInNewSpan {
        next: AtomicU64::new(0),
        spawned: Default::default(),
    };
    tracing::subscriber::with_default(subscriber, || {
        fibra::run(|| {
            // The subscriber's fiber takes the slot this one was promised:
            // its handle must still cancel and join this one.
            let sleeper = fibra::spawn(|| fibra::sleep(std::time::Duration::from_secs(3600)));
            fibra::yield_now();
            sleeper.cancel();
            let joined = fibra::timeout(std::time::Duration::from_secs(20), || sleeper.join());
            let err = joined
                .expect("the cancel did not reach the fiber")
                .unwrap_err();
            assert!(err.is_cancelled());
        });
    });
}
