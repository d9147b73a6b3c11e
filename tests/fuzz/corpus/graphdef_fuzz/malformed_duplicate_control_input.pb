

xPlaceholder*
dtype0
	
cNoOp

nNegx^c^c*
T0