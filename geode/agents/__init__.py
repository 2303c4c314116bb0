"""What the four maintenance agents share: the agent contract, proposals and the approval
queue, atomic apply/undo, upkeep runs.

Nothing is imported here: ``import geode.queue.proposals`` must not pull in Celery, and the agent
contract must not pull in SQLModel. Import the module you need.
"""
