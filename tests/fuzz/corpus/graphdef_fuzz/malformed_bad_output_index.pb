

xPlaceholder*
dtype0

nNegx:2*
T0