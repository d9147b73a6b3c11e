

xPlaceholder*
dtype0
	
cNoOp

nNeg^cx*
T0