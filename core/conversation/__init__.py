"""What people do with a conversation, over its projection.

Naming (a title from a prompt, "<title> (branch N)"), asking again, bringing a
branch back, comparing two branches, exporting, the lists and details the CLI
shows, and a conversation's own model settings. None of these reads events:
they read the :class:`~branchwise.core.projection.projection.Projection` (or a
hook of ``core/projection/`` when they need more than its state).
"""
