"""Edits a caller makes to what is stored, outside the pipeline: roll back one trace
(`rollback`), pin a memory or give it an expiry (`patch`), delete one memory (`delete`, its
port in `ports`), erase a user everywhere (`erase`)."""
