//! A runtime that stays awake a moment after each message it reads, so that the next one (the
//! server's answer to a request just passed on, the client's next request) is found by a look
//! at the reactor, not by a wake-up.
//!
//! A thread asleep in `epoll_wait` that a pipe's write wakes costs its waker tens of
//! microseconds on a VM (the idle CPU is woken, then the thread): more than all of moniker's
//! own work for a message, and it comes twice a call. A server that answers in microseconds, or
//! a client that asks again at once, answers within a short window; so for [`WINDOW`] after
//! the work of each message read is done, a thread about to sleep looks again (a system call
//! that does not wait) instead. Past the window it sleeps as before: an idle moniker spends
//! nothing. The window opens when the thread first runs out of work after a message, not when
//! the message came: a request's own work (tens of µs over HTTP) does not use it up.
//!
//! The mechanism is the runtime's own: [`park_hook`] runs as the thread is about to sleep
//! (`on_thread_park`); within the window it wakes [`stay`], a task that does nothing when run,
//! and a runtime with a task to run checks the reactor without waiting, runs it, and comes back
//! to the hook. A message counts where it is read whole ([`heard`]: a client's line on stdio, a
//! stdio server's line on its stdout, a request to `/mcp` that passed its checks; not an empty
//! line, nor a server's log on stderr), so a peer keeps moniker awake only by sending
//! messages, each a message's worth of work anyway. Only a runtime of one thread keeps awake so
//! ([`runtime`]: every `serve` but `--http --threads N`): on a runtime of several, a worker
//! asleep in the reactor would still be the one woken.

use std::cell::Cell;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

/// How long a thread stays awake after the work of the last message it read.
pub const WINDOW: Duration = Duration::from_micros(50);

thread_local! {
    /// This thread read a message since it last ran out of work.
    static HEARD: Cell<bool> = const { Cell::new(false) };
    /// When this thread last ran out of work after a message.
    static IDLE: Cell<Option<Instant>> = const { Cell::new(None) };
    /// The task [`stay`] runs, to be woken while the window is open.
    static STAY: Cell<Option<Waker>> = const { Cell::new(None) };
}

/// A message was read on this thread: the window opens again once its work is done.
pub fn heard() {
    HEARD.set(true);
}

/// A runtime of one thread that stays awake for `window` after each message it reads.
pub fn runtime(window: Duration) -> std::io::Result<tokio::runtime::Runtime> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .on_thread_park(park_hook(window))
        .build()?;
    runtime.spawn(stay());
    Ok(runtime)
}

/// For `on_thread_park`: within the window, gives the runtime a task to run, so that it checks
/// the reactor without sleeping.
fn park_hook(window: Duration) -> impl Fn() + Send + Sync + 'static {
    move || {
        if HEARD.replace(false) {
            IDLE.set(Some(Instant::now()));
        }
        let open = IDLE.get().is_some_and(|at| at.elapsed() < window);
        if open && let Some(stay) = STAY.take() {
            stay.wake();
        }
    }
}

/// The task [`park_hook`] wakes: run for the life of the runtime, on its thread.
async fn stay() {
    std::future::poll_fn(|cx| {
        STAY.set(Some(cx.waker().clone()));
        Poll::<()>::Pending
    })
    .await;
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::io::Write as _;

    use nix::sys::resource::{UsageWho, getrusage};
    use tokio::io::BufReader;

    use super::*;
    use crate::framing::{Frame, read_frame};

    /// The times this thread has slept (given up its CPU to wait).
    fn sleeps() -> i64 {
        getrusage(UsageWho::RUSAGE_THREAD)
            .expect("the thread's usage")
            .voluntary_context_switches()
    }

    /// A line written to `to` after `delay`, from another thread.
    fn later(to: &std::fs::File, delay: Duration) -> std::thread::JoinHandle<()> {
        let mut to = to.try_clone().expect("a copy of the pipe");
        std::thread::spawn(move || {
            std::thread::sleep(delay);
            to.write_all(b"{}\n").expect("a line written");
        })
    }

    #[test]
    fn a_thread_that_read_a_message_looks_again_instead_of_sleeping() {
        let window = Duration::from_millis(300);
        let runtime = runtime(window).expect("a runtime");
        runtime.block_on(async {
            let (from, to) = nix::unistd::pipe().expect("a pipe");
            let to = std::fs::File::from(to);
            let from = tokio::net::unix::pipe::Receiver::from_owned_fd(from).expect("its reader");
            let mut from = BufReader::new(from);
            let mut buf = Vec::new();
            let mut next = async |delay| {
                let writer = later(&to, delay);
                let before = sleeps();
                let frame = read_frame(&mut from, &mut buf, 64).await.expect("a line");
                let slept = sleeps() - before;
                heard();
                assert_eq!(frame, Frame::Line);
                (writer, slept)
            };
            // The first line: nothing was read before it, so the thread sleeps until it comes.
            let (first, slept) = next(Duration::from_millis(20)).await;
            assert!(slept >= 1, "slept {slept} times");
            // The next within the window: the thread looked for it the whole time.
            let (second, slept) = next(Duration::from_millis(20)).await;
            assert_eq!(slept, 0);
            // Past the window, it sleeps again.
            let (third, slept) = next(window * 2).await;
            assert!(slept >= 1, "slept {slept} times");
            for writer in [first, second, third] {
                writer.join().expect("the writer");
            }
        });
    }
}
