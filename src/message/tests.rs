//! Tests over the whole module: the reference examples, problems, round trips.
