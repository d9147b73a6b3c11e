

xPlaceholder*
dtype0

nNegx*
T0