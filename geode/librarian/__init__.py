"""The Librarian: broken links and paths, rotted signposts, orphans, notes that can never fire."""
