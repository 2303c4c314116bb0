"""The Cleaner: folders over their cap, near-duplicates and contradictions; it proposes
reversible archiving, status changes and merge stubs, and never edits the store itself."""
