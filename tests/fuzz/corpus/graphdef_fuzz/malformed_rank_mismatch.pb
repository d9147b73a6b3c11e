
2
xPlaceholder*
shape
:*
dtype0
:
fPlaceholder*
shape:*
dtype0
E
convConv2Dxf*
T0*
paddingSAME*
strides
