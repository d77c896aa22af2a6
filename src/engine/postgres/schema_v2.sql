-- Schema version 2: sequence numbers (PROTOCOLS.md section 14).

-- Each sender's counter: the last number given, in its epoch. It moves in the transaction
-- that delivers the numbered message (never on its own), under the sender's advisory lock.
CREATE TABLE {s}.seq_counters (
  agent text COLLATE "C" PRIMARY KEY,
  epoch bigint NOT NULL,
  last bigint NOT NULL
);

-- Each receiver's lastSeen, as the JSON of `seq::Receiver`.
CREATE TABLE {s}.seq_seen (agent text COLLATE "C" PRIMARY KEY, state text NOT NULL);
