//! A future polled again at once when it wakes itself while it is being polled.
//!
//! hyper polls a request's handler inside its connection's task, and its body channel wakes
//! the channel's sender (the connection) when the handler takes the body: the task wakes
//! itself during its own poll. tokio takes such a wake for a yield: the task goes to the back
//! of the queue and an idle worker is woken to steal it (a futex call, and a thread that wakes
//! to find nothing: one more context switch a request, seen with perf). [`PollAgain`] polls
//! the future again in place instead, at most [`AGAIN`] times in a row; a wake from anywhere
//! else (another task, the socket) goes to the task as before.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;

/// The future is being polled.
const POLLING: u8 = 1;
/// It was woken since its poll began.
const WOKEN: u8 = 2;

/// How many times in a row a future that keeps waking itself is polled in place; then its wake
/// goes to the scheduler, which runs the other tasks first (a future that yields on purpose,
/// as hyper's connection does after 16 turns of its loop, still yields).
const AGAIN: usize = 4;

/// `inner`, whose wakes during its own poll are answered by polling it again at once.
pub(super) struct PollAgain<F> {
    inner: Pin<Box<F>>,
    signal: Arc<Signal>,
    /// The waker `inner` is polled with: `signal`'s.
    waker: Waker,
}

/// Whether the future is being polled or was woken meanwhile, and the task to wake otherwise.
struct Signal {
    state: AtomicU8,
    task: AtomicWaker,
}

impl Wake for Signal {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // While it is polled, the poll sees the mark and polls again; else the task is woken.
        if self.state.fetch_or(WOKEN, Ordering::AcqRel) & POLLING == 0 {
            self.task.wake();
        }
    }
}

impl<F: Future> PollAgain<F> {
    pub(super) fn new(inner: F) -> Self {
        let signal = Arc::new(Signal {
            state: AtomicU8::new(0),
            task: AtomicWaker::new(),
        });
        Self {
            inner: Box::pin(inner),
            waker: Waker::from(signal.clone()),
            signal,
        }
    }
}

impl<F: Future> Future for PollAgain<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        this.signal.task.register(cx.waker());
        for _ in 0..AGAIN {
            // A wake from before this point is answered by this poll.
            this.signal.state.store(POLLING, Ordering::Release);
            let mut inner = Context::from_waker(&this.waker);
            if let Poll::Ready(out) = this.inner.as_mut().poll(&mut inner) {
                this.signal.state.store(0, Ordering::Release);
                return Poll::Ready(out);
            }
            // Done polling, unless a wake came meanwhile: then poll again.
            let done =
                this.signal
                    .state
                    .compare_exchange(POLLING, 0, Ordering::AcqRel, Ordering::Acquire);
            if done.is_ok() {
                return Poll::Pending;
            }
        }
        this.signal.state.store(0, Ordering::Release);
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// Counts the wakes its task's waker gets.
    struct Counted(AtomicUsize);

    impl Wake for Counted {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A future that wakes itself during its first `n` polls, then is ready.
    struct WakesItself {
        n: usize,
        polls: usize,
    }

    impl Future for WakesItself {
        type Output = usize;
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<usize> {
            self.polls += 1;
            if self.polls > self.n {
                return Poll::Ready(self.polls);
            }
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }

    fn poll_once<F: Future>(f: &mut PollAgain<F>, task: &Arc<Counted>) -> Poll<F::Output> {
        let waker = Waker::from(task.clone());
        Pin::new(f).poll(&mut Context::from_waker(&waker))
    }

    #[test]
    fn a_wake_during_the_poll_is_answered_in_place() {
        let task = Arc::new(Counted(AtomicUsize::new(0)));
        let mut f = PollAgain::new(WakesItself { n: 2, polls: 0 });
        assert_eq!(poll_once(&mut f, &task), Poll::Ready(3));
        assert_eq!(task.0.load(Ordering::SeqCst), 0, "the task was never woken");
    }

    #[test]
    fn a_future_that_keeps_waking_itself_still_yields() {
        let task = Arc::new(Counted(AtomicUsize::new(0)));
        let mut f = PollAgain::new(WakesItself { n: 100, polls: 0 });
        assert_eq!(poll_once(&mut f, &task), Poll::Pending);
        assert_eq!(
            task.0.load(Ordering::SeqCst),
            1,
            "woken once, to run again later"
        );
        assert_eq!(f.inner.polls, AGAIN);
    }

    #[test]
    fn a_wake_after_the_poll_reaches_the_task() {
        let task = Arc::new(Counted(AtomicUsize::new(0)));
        let (tx, rx) = tokio::sync::oneshot::channel::<u8>();
        let mut f = PollAgain::new(rx);
        assert!(poll_once(&mut f, &task).is_pending());
        assert_eq!(task.0.load(Ordering::SeqCst), 0);
        tx.send(7).unwrap();
        assert_eq!(task.0.load(Ordering::SeqCst), 1, "the send woke the task");
        assert_eq!(poll_once(&mut f, &task), Poll::Ready(Ok(7)));
    }
}
