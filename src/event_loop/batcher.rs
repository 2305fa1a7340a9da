//! A batching thread beside the loop: it turns a stream of small messages into de-duplicated
//! batches (take one, drain whatever else is queued, keep the first item of each key) and
//! hands each batch back to the loop through a channel and the loop's waker. The loop then
//! applies a batch in one pass instead of one pass per item (Java's BatchUnregistrationService
//! is the model). It knows nothing of what the items are.

use super::LoopWaker;
use crossbeam_channel::{bounded, unbounded, Receiver, Sender};
use std::collections::HashSet;
use std::hash::Hash;
use std::io;
use std::thread::JoinHandle;

/// Items keyed by `K`; each key at most once per batch.
pub type Batch<K, V> = Vec<(K, V)>;

/// Starts the thread; a full queue (`capacity` messages) is the sender's to report. The
/// thread ends when every sender is dropped or the receiver is gone.
#[allow(clippy::type_complexity)]
pub fn spawn_batcher<K, V>(
    name: &str,
    capacity: usize,
    waker: LoopWaker,
) -> io::Result<(Sender<Batch<K, V>>, Receiver<Batch<K, V>>, JoinHandle<()>)>
where
    K: Hash + Eq + Clone + Send + 'static,
    V: Send + 'static,
{
    let (in_tx, in_rx) = bounded::<Batch<K, V>>(capacity.max(1));
    let (out_tx, out_rx) = unbounded();
    let thread = std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || run(in_rx, out_tx, waker))?;
    Ok((in_tx, out_rx, thread))
}

fn run<K: Hash + Eq + Clone, V>(
    input: Receiver<Batch<K, V>>,
    output: Sender<Batch<K, V>>,
    waker: LoopWaker,
) {
    while let Ok(first) = input.recv() {
        let mut seen = HashSet::new();
        let batch: Batch<K, V> = std::iter::once(first)
            .chain(input.try_iter())
            .flatten()
            .filter(|(key, _)| seen.insert(key.clone()))
            .collect();
        if batch.is_empty() {
            continue;
        }
        if output.send(batch).is_err() {
            return;
        }
        waker.wake();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mio::{Poll, Token, Waker};
    use std::sync::Arc;

    #[test]
    fn queued_messages_come_back_as_one_batch_without_duplicates() {
        let poll = Poll::new().unwrap();
        let waker = LoopWaker(Arc::new(Waker::new(poll.registry(), Token(0)).unwrap()));
        // Fill the queue before the thread starts taking, so the drain sees everything.
        let (in_tx, in_rx) = bounded::<Batch<&str, u32>>(8);
        in_tx.send(vec![("a", 1), ("b", 2)]).unwrap();
        in_tx.send(vec![("a", 3), ("c", 4)]).unwrap();
        in_tx.send(vec![]).unwrap();
        drop(in_tx);
        let (out_tx, out_rx) = unbounded();
        run(in_rx, out_tx, waker);
        let batches: Vec<_> = out_rx.try_iter().collect();
        assert_eq!(batches, vec![vec![("a", 1), ("b", 2), ("c", 4)]]);
    }

    #[test]
    fn the_thread_ends_when_its_senders_are_dropped() {
        let poll = Poll::new().unwrap();
        let waker = LoopWaker(Arc::new(Waker::new(poll.registry(), Token(0)).unwrap()));
        let (tx, rx, thread) = spawn_batcher::<u32, ()>("test-batcher", 4, waker).unwrap();
        tx.send(vec![(1, ()), (1, ())]).unwrap();
        assert_eq!(rx.recv().unwrap(), vec![(1, ())]);
        drop(tx);
        thread.join().unwrap();
    }
}
