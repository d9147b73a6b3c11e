
4
xPlaceholder*
shape:
*
dtype0