-- The schema of a trace file, version 1 (PRAGMA user_version; docs/trace-format.md explains every
-- table). The one statement of it: the C++ store embeds this file at build time
-- (trace/CMakeLists.txt) and the Python package (mhc_torch, python/mhc_torch/schema.sql) reads it.
-- Each "-- section: NAME" line starts a part that a writer executes as one script.
-- Additive changes only: new tables or new nullable columns, which readers check for before use,
-- so that files written before them still read.

-- section: trace_tables
-- The tables of the trace itself (what ran).
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE strings (id INTEGER PRIMARY KEY, text TEXT NOT NULL);
CREATE TABLE allocations (
  id INTEGER PRIMARY KEY, device INTEGER NOT NULL, address INTEGER NOT NULL,
  bytes INTEGER NOT NULL, t_alloc INTEGER NOT NULL, t_free INTEGER,
  stream INTEGER NOT NULL, category INTEGER NOT NULL, label INTEGER NOT NULL DEFAULT 0,
  requested_bytes INTEGER);
CREATE TABLE kernels (
  id INTEGER PRIMARY KEY, device INTEGER NOT NULL, stream INTEGER NOT NULL,
  name INTEGER NOT NULL, t_start INTEGER NOT NULL, t_end INTEGER NOT NULL,
  step INTEGER NOT NULL, grid_x INTEGER NOT NULL, grid_y INTEGER NOT NULL,
  grid_z INTEGER NOT NULL, block_x INTEGER NOT NULL, block_y INTEGER NOT NULL,
  block_z INTEGER NOT NULL, shared_mem INTEGER NOT NULL, registers INTEGER NOT NULL,
  correlation INTEGER NOT NULL);
CREATE TABLE accesses (kernel INTEGER NOT NULL, allocation INTEGER NOT NULL, mode INTEGER NOT NULL,
  PRIMARY KEY (kernel, allocation)) WITHOUT ROWID;
CREATE TABLE copies (
  id INTEGER PRIMARY KEY, device INTEGER NOT NULL, stream INTEGER NOT NULL,
  kind INTEGER NOT NULL, bytes INTEGER NOT NULL, t_start INTEGER NOT NULL,
  t_end INTEGER NOT NULL);
CREATE TABLE markers (
  id INTEGER PRIMARY KEY, name INTEGER NOT NULL, t_start INTEGER NOT NULL,
  t_end INTEGER NOT NULL, kind INTEGER NOT NULL, idx INTEGER NOT NULL);
CREATE TABLE segments (
  id INTEGER PRIMARY KEY, device INTEGER NOT NULL, stream INTEGER NOT NULL,
  address INTEGER NOT NULL, bytes INTEGER NOT NULL, t_alloc INTEGER NOT NULL, t_free INTEGER,
  expandable INTEGER NOT NULL, reconstructed INTEGER NOT NULL);
CREATE TABLE modules (
  id INTEGER PRIMARY KEY, name INTEGER NOT NULL, parent INTEGER NOT NULL, type INTEGER NOT NULL);
CREATE TABLE kernel_info (
  kernel INTEGER PRIMARY KEY, module INTEGER NOT NULL, phase INTEGER NOT NULL,
  flops INTEGER NOT NULL, bytes INTEGER NOT NULL);
CREATE TABLE saved_tensors (allocation INTEGER NOT NULL, kernel INTEGER NOT NULL, packs INTEGER,
  PRIMARY KEY (allocation, kernel)) WITHOUT ROWID;

-- section: run_tables
-- The tables of runs: in a trace, or alone in a runs database (--runs-db).
-- runs.trace_fingerprint: the fingerprint of the trace the run was computed from (NULL: stored by
-- an mhc before 2026-12-06); the store adds the column to files made before it.
CREATE TABLE runs (
  id INTEGER PRIMARY KEY, kind TEXT NOT NULL, name TEXT NOT NULL, status TEXT NOT NULL,
  created TEXT NOT NULL, base_run INTEGER NOT NULL DEFAULT 0, trace_fingerprint TEXT);
CREATE TABLE run_config (run INTEGER NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
  PRIMARY KEY (run, key)) WITHOUT ROWID;
CREATE TABLE run_metrics (run INTEGER NOT NULL, key TEXT NOT NULL, value REAL NOT NULL,
  PRIMARY KEY (run, key)) WITHOUT ROWID;
CREATE TABLE run_events (run INTEGER NOT NULL, kind INTEGER NOT NULL, t_start INTEGER NOT NULL,
  t_end INTEGER NOT NULL, allocation INTEGER NOT NULL, kernel INTEGER NOT NULL,
  bytes INTEGER NOT NULL);
CREATE TABLE run_kernels (run INTEGER NOT NULL, kernel INTEGER NOT NULL,
  t_start INTEGER NOT NULL, t_end INTEGER NOT NULL, PRIMARY KEY (run, kernel)) WITHOUT ROWID;
CREATE TABLE run_memory (run INTEGER NOT NULL, t INTEGER NOT NULL,
  device_bytes INTEGER NOT NULL, host_bytes INTEGER NOT NULL);

-- section: runs_db_tables
-- Only in a runs database: which traces (of a job) its runs belong to, and each run's trace.
CREATE TABLE traces (id INTEGER PRIMARY KEY, path TEXT NOT NULL, fingerprint TEXT NOT NULL UNIQUE);
CREATE TABLE run_trace (run INTEGER PRIMARY KEY, trace INTEGER NOT NULL);

-- section: lookups
-- Lookup tables that give the integer codes their names, for people querying with sqlite3;
-- the writers' enumerations (C++ trace/include/mhc/trace/model.hpp, Python mhc_torch.store) use these codes.
CREATE TABLE categories (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
INSERT INTO categories VALUES (0,'param'),(1,'grad'),(2,'optimizer'),(3,'activation'),
  (4,'workspace'),(5,'comm'),(6,'other');
CREATE TABLE access_modes (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
INSERT INTO access_modes VALUES (1,'read'),(2,'write'),(3,'read-write');
CREATE TABLE copy_kinds (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
INSERT INTO copy_kinds VALUES (0,'H2D'),(1,'D2H'),(2,'D2D'),(3,'P2P'),(4,'memset'),(5,'H2H');
CREATE TABLE marker_kinds (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
INSERT INTO marker_kinds VALUES (0,'step'),(1,'layer'),(2,'range');
CREATE TABLE event_kinds (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
INSERT INTO event_kinds VALUES (0,'swap_out'),(1,'swap_in'),(2,'evict_clean'),(3,'drop'),
  (4,'recompute'),(5,'stall'),(6,'oom'),(7,'prefetch');
CREATE TABLE phases (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
INSERT INTO phases VALUES (0,'forward'),(1,'backward'),(2,'optimizer'),(3,'recompute'),(4,'other');

-- section: trace_indexes
-- Secondary indexes of the trace tables, built after the bulk load (faster than during it). None:
-- accesses are found by kernel through the table's key; files written before 2026-12-02 also have
-- accesses_by_allocation ON accesses (allocation), which a user who queries accesses by allocation
-- may create with that one statement (docs/trace-format.md, "Indexes"); readers work either way.

-- section: run_indexes
-- Secondary indexes of the run tables. run_events has none: a run's events are one range of its
-- rowids, which run_event_rows holds (below); files made before it have
-- run_events_by_run ON run_events (run, t_start) instead, which readers use where a run has no range.
CREATE INDEX run_memory_by_run ON run_memory (run, t);

-- section: run_event_rows
-- Where each run's events lie in run_events: the rowids first_row .. last_row, in the order they
-- happened (an empty run: last_row = first_row - 1). The store writes a run's events together and
-- adds its row; a change to run_events by anyone else (these triggers) drops the rows of the runs
-- it touched, whose events are then found by `WHERE run = N` as in files made before this table.
-- Every statement here may run again on a file that has it, and on a file made before it.
CREATE TABLE IF NOT EXISTS run_event_rows (run INTEGER PRIMARY KEY, first_row INTEGER NOT NULL,
  last_row INTEGER NOT NULL);
CREATE TRIGGER IF NOT EXISTS run_event_rows_insert AFTER INSERT ON run_events
  BEGIN DELETE FROM run_event_rows WHERE run = NEW.run; END;
CREATE TRIGGER IF NOT EXISTS run_event_rows_update AFTER UPDATE ON run_events
  BEGIN DELETE FROM run_event_rows WHERE run IN (OLD.run, NEW.run); END;
CREATE TRIGGER IF NOT EXISTS run_event_rows_delete AFTER DELETE ON run_events
  BEGIN DELETE FROM run_event_rows WHERE run = OLD.run; END;

-- section: content_digest_triggers
-- A trace's content digest (meta content_digest, docs/trace-format.md "Content digest") is written
-- when the trace is complete; a row of a table runs are computed from, inserted, changed or deleted
-- after that (by sqlite3, pandas, anything) gives it a new identity: 'edited:' and a random value.
-- Both writers run this section after the rows and the meta. A writer that wrote no digest has no
-- meta row for them to change.
CREATE TRIGGER IF NOT EXISTS content_digest_INSERT_strings AFTER INSERT ON strings
  BEGIN UPDATE meta SET value = 'edited:' || lower(hex(randomblob(8))) WHERE key = 'content_digest'; END;
CREATE TRIGGER IF NOT EXISTS content_digest_UPDATE_strings AFTER UPDATE ON strings
  BEGIN UPDATE meta SET value = 'edited:' || lower(hex(randomblob(8))) WHERE key = 'content_digest'; END;
CREATE TRIGGER IF NOT EXISTS content_digest_DELETE_strings AFTER DELETE ON strings
  BEGIN UPDATE meta SET value = 'edited:' || lower(hex(randomblob(8))) WHERE key = 'content_digest'; END;
CREATE TRIGGER IF NOT EXISTS content_digest_INSERT_allocations AFTER INSERT ON allocations
  BEGIN UPDATE meta SET value = 'edited:' || lower(hex(randomblob(8))) WHERE key = 'content_digest'; END;
CREATE TRIGGER IF NOT EXISTS content_digest_UPDATE_allocations AFTER UPDATE ON allocations
  BEGIN UPDATE meta SET value = 'edited:' || lower(hex(randomblob(8))) WHERE key = 'content_digest'; END;
CREATE TRIGGER IF NOT EXISTS content_digest_DELETE_allocations AFTER DELETE ON allocations
  BEGIN UPDATE meta SET value = 'edited:' || lower(hex(randomblob(8))) WHERE key = 'content_digest'; END;
CREATE TRIGGER IF NOT EXISTS content_digest_INSERT_kernels AFTER INSERT ON kernels
  BEGIN UPDATE meta SET value = 'edited:' || lower(hex(randomblob(8))) WHERE key = 'content_digest'; END;
CREATE TRIGGER IF NOT EXISTS content_digest_UPDATE_kernels AFTER UPDATE ON kernels
  BEGIN UPDATE meta SET value = 'edited:' || lower(hex(randomblob(8))) WHERE key = 'content_digest'; END;
CREATE TRIGGER IF NOT EXISTS content_digest_DELETE_kernels AFTER DELETE ON kernels
  BEGIN UPDATE meta SET value = 'edited:' || lower(hex(randomblob(8))) WHERE key = 'content_digest'; END;
CREATE TRIGGER IF NOT EXISTS content_digest_INSERT_accesses AFTER INSERT ON accesses
  BEGIN UPDATE meta SET value = 'edited:' || lower(hex(randomblob(8))) WHERE key = 'content_digest'; END;
CREATE TRIGGER IF NOT EXISTS content_digest_UPDATE_accesses AFTER UPDATE ON accesses
  BEGIN UPDATE meta SET value = 'edited:' || lower(hex(randomblob(8))) WHERE key = 'content_digest'; END;
CREATE TRIGGER IF NOT EXISTS content_digest_DELETE_accesses AFTER DELETE ON accesses
  BEGIN UPDATE meta SET value = 'edited:' || lower(hex(randomblob(8))) WHERE key = 'content_digest'; END;
CREATE TRIGGER IF NOT EXISTS content_digest_INSERT_copies AFTER INSERT ON copies
  BEGIN UPDATE meta SET value = 'edited:' || lower(hex(randomblob(8))) WHERE key = 'content_digest'; END;
CREATE TRIGGER IF NOT EXISTS content_digest_UPDATE_copies AFTER UPDATE ON copies
  BEGIN UPDATE meta SET value = 'edited:' || lower(hex(randomblob(8))) WHERE key = 'content_digest'; END;
CREATE TRIGGER IF NOT EXISTS content_digest_DELETE_copies AFTER DELETE ON copies
  BEGIN UPDATE meta SET value = 'edited:' || lower(hex(randomblob(8))) WHERE key = 'content_digest'; END;
CREATE TRIGGER IF NOT EXISTS content_digest_INSERT_markers AFTER INSERT ON markers
  BEGIN UPDATE meta SET value = 'edited:' || lower(hex(randomblob(8))) WHERE key = 'content_digest'; END;
CREATE TRIGGER IF NOT EXISTS content_digest_UPDATE_markers AFTER UPDATE ON markers
  BEGIN UPDATE meta SET value = 'edited:' || lower(hex(randomblob(8))) WHERE key = 'content_digest'; END;
CREATE TRIGGER IF NOT EXISTS content_digest_DELETE_markers AFTER DELETE ON markers
  BEGIN UPDATE meta SET value = 'edited:' || lower(hex(randomblob(8))) WHERE key = 'content_digest'; END;
CREATE TRIGGER IF NOT EXISTS content_digest_INSERT_segments AFTER INSERT ON segments
  BEGIN UPDATE meta SET value = 'edited:' || lower(hex(randomblob(8))) WHERE key = 'content_digest'; END;
CREATE TRIGGER IF NOT EXISTS content_digest_UPDATE_segments AFTER UPDATE ON segments
  BEGIN UPDATE meta SET value = 'edited:' || lower(hex(randomblob(8))) WHERE key = 'content_digest'; END;
CREATE TRIGGER IF NOT EXISTS content_digest_DELETE_segments AFTER DELETE ON segments
  BEGIN UPDATE meta SET value = 'edited:' || lower(hex(randomblob(8))) WHERE key = 'content_digest'; END;
CREATE TRIGGER IF NOT EXISTS content_digest_INSERT_modules AFTER INSERT ON modules
  BEGIN UPDATE meta SET value = 'edited:' || lower(hex(randomblob(8))) WHERE key = 'content_digest'; END;
CREATE TRIGGER IF NOT EXISTS content_digest_UPDATE_modules AFTER UPDATE ON modules
  BEGIN UPDATE meta SET value = 'edited:' || lower(hex(randomblob(8))) WHERE key = 'content_digest'; END;
CREATE TRIGGER IF NOT EXISTS content_digest_DELETE_modules AFTER DELETE ON modules
  BEGIN UPDATE meta SET value = 'edited:' || lower(hex(randomblob(8))) WHERE key = 'content_digest'; END;
CREATE TRIGGER IF NOT EXISTS content_digest_INSERT_kernel_info AFTER INSERT ON kernel_info
  BEGIN UPDATE meta SET value = 'edited:' || lower(hex(randomblob(8))) WHERE key = 'content_digest'; END;
CREATE TRIGGER IF NOT EXISTS content_digest_UPDATE_kernel_info AFTER UPDATE ON kernel_info
  BEGIN UPDATE meta SET value = 'edited:' || lower(hex(randomblob(8))) WHERE key = 'content_digest'; END;
CREATE TRIGGER IF NOT EXISTS content_digest_DELETE_kernel_info AFTER DELETE ON kernel_info
  BEGIN UPDATE meta SET value = 'edited:' || lower(hex(randomblob(8))) WHERE key = 'content_digest'; END;
CREATE TRIGGER IF NOT EXISTS content_digest_INSERT_saved_tensors AFTER INSERT ON saved_tensors
  BEGIN UPDATE meta SET value = 'edited:' || lower(hex(randomblob(8))) WHERE key = 'content_digest'; END;
CREATE TRIGGER IF NOT EXISTS content_digest_UPDATE_saved_tensors AFTER UPDATE ON saved_tensors
  BEGIN UPDATE meta SET value = 'edited:' || lower(hex(randomblob(8))) WHERE key = 'content_digest'; END;
CREATE TRIGGER IF NOT EXISTS content_digest_DELETE_saved_tensors AFTER DELETE ON saved_tensors
  BEGIN UPDATE meta SET value = 'edited:' || lower(hex(randomblob(8))) WHERE key = 'content_digest'; END;
