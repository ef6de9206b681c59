//! Where a batch's frames go: the ring sink copies them into a ring port's
//! RX ring, the queue sink pushes them into a frame queue. Each sink is one
//! loop, fed by whatever source the frames came from.

pub(crate) mod queue;
pub(crate) mod ring;
