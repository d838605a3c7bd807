"""The precision kind: a source's gradient in float16 or bfloat16 (mixed precision, a loss
scale) against the same computation in float32."""
