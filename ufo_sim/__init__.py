"""ufo_sim: a discrete-event simulator of one oversubscribed KVM host."""
