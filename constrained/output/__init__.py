"""Reading model output back: the schema-aware parser, the streaming
parser, rendering calls in a dialect, and repairing near-miss arguments."""
