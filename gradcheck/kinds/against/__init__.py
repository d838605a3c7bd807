"""The against kind: TARGET's values and VJP against another TARGET's at the same arguments
(--against; a loaded model against its original), and custom gradients lost in a save."""
